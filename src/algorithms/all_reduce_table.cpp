// All-reduce's algorithms, in order of preference on equal cost.
#include "algorithms/algorithms.hpp"
#include "algorithms/cost_model.hpp"
#include "algorithms/table_helpers.hpp"

namespace strata::algo {
namespace {

using namespace tables;

double shm_cost(const GroupView& g, size_t B) {
  return cost::segment_all_reduce(cost::segment(g), g.n, double(B));
}
void shm_run(Exec& e, const Args& a) {
  shm::all_reduce(e.shm_context(), a.in, a.out, a.count, a.dtype, a.op);
}

double hierarchical_cost(const GroupView& g, size_t B) {
  return cost::hierarchical_all_reduce(g, double(B));
}

double recursive_doubling_cost(const GroupView& g, size_t B) {
  return cost::recursive_doubling(cost::network(g), g.n, double(B));
}
void recursive_doubling_run(Exec& e, const Args& a) {
  recursive_doubling_all_reduce(e.p2p, a.in, a.out, a.count, a.dtype, a.op);
}

double ring_cost(const GroupView& g, size_t B) {
  return cost::ring_all_reduce(cost::network(g), g.n, double(B));
}
void ring_run(Exec& e, const Args& a) {
  ring_all_reduce(e.p2p, a.in, a.out, a.count, a.dtype, a.op);
}

double halving_doubling_cost(const GroupView& g, size_t B) {
  return cost::halving_doubling(cost::network(g), g.n, double(B));
}
void halving_doubling_run(Exec& e, const Args& a) {
  halving_doubling_all_reduce(e.p2p, a.in, a.out, a.count, a.dtype, a.op);
}

constexpr Algorithm kAllReduce[] = {
    {"shm", "one node: stage in the segment, reduce 1/n from every slot, copy out", shm_cost,
     on_segment, shm_run, kNoSegment, false, /*immediate=*/true},
    {"hierarchical",
     "several nodes: node reduce-scatter, rail all-reduce, node all-gather",
     hierarchical_cost,
     two_level,
     run_two_level<Collective::all_reduce>,
     {},
     /*forced_falls_back=*/true},
    {"recursive_doubling", "log2 p exchanges of the whole vector (fold to a power of two)",
     recursive_doubling_cost, anywhere, recursive_doubling_run},
    {"ring", "ring reduce-scatter then ring all-gather, pipelined in chunks", ring_cost, anywhere,
     ring_run},
    {"halving_doubling", "reduce-scatter by halving, all-gather by doubling (Rabenseifner)",
     halving_doubling_cost, anywhere, halving_doubling_run},
};

}  // namespace

std::span<const Algorithm> all_reduce_table() { return kAllReduce; }

}  // namespace strata::algo
