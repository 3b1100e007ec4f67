// Reduce-scatter's algorithms, in order of preference on equal cost.
#include "algorithms/algorithms.hpp"
#include "algorithms/cost_model.hpp"
#include "algorithms/table_helpers.hpp"

namespace strata::algo {
namespace {

using namespace tables;

double shm_cost(const GroupView& g, size_t B) {
  return cost::segment_data_movement(cost::segment(g), g.n, double(B), true);
}
void shm_run(Exec& e, const Args& a) {
  shm::reduce_scatter(e.shm_context(), a.in, a.out, a.count, a.dtype, a.op);
}

double hierarchical_cost(const GroupView& g, size_t B) {
  return cost::hierarchical_reduce_scatter(g, double(B));
}

double ring_cost(const GroupView& g, size_t B) {
  return cost::ring_reduce_scatter(cost::network(g), g.n, double(B));
}
void ring_run(Exec& e, const Args& a) {
  ring_reduce_scatter(e.p2p, a.in, a.out, kernels::EqualBlocks{a.count}, a.dtype, a.op);
}

constexpr Algorithm kReduceScatter[] = {
    {"shm", "one node: stage in the segment, each rank reduces its block from every slot", shm_cost,
     on_segment, shm_run, kNoSegment},
    {"hierarchical",
     "several equal nodes: node reduce-scatter, then rail reduce-scatter",
     hierarchical_cost,
     two_level_even,
     run_two_level<Collective::reduce_scatter>,
     {},
     /*forced_falls_back=*/true},
    {"ring", "n-1 steps, each block's running partial passed on and added to, pipelined", ring_cost,
     anywhere, ring_run},
};

}  // namespace

std::span<const Algorithm> reduce_scatter_table() { return kReduceScatter; }

}  // namespace strata::algo
