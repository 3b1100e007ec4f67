// All-gather's algorithms, in order of preference on equal cost.
#include <cstring>

#include "algorithms/algorithms.hpp"
#include "algorithms/cost_model.hpp"
#include "algorithms/table_helpers.hpp"
#include "shm/sync.hpp"

namespace strata::algo {
namespace {

using namespace tables;

double shm_cost(const GroupView& g, size_t B) {
  return cost::segment_data_movement(cost::segment(g), g.n, double(B), false);
}
void shm_run(Exec& e, const Args& a) {
  shm::all_gather(e.shm_context(shm::call_word(a.dtype, -1, -1)), a.in, a.out, a.bytes());
}

double hierarchical_cost(const GroupView& g, size_t B) {
  return cost::hierarchical_all_gather(g, double(B));
}

double ring_cost(const GroupView& g, size_t B) {
  return cost::ring_all_gather(cost::network(g), g.n, double(B));
}
void ring_run(Exec& e, const Args& a) {
  const size_t es = dtype_size(a.dtype);
  auto* mine = static_cast<uint8_t*>(a.out) + a.count * size_t(e.p2p.rank()) * es;
  if (a.in != mine) std::memcpy(mine, a.in, a.count * es);
  ring_all_gather(e.p2p, a.out, kernels::EqualBlocks{a.count}, es);
}

constexpr Algorithm kAllGather[] = {
    {"shm", "one node: stage in the segment, every rank copies every block out", shm_cost,
     on_segment, shm_run, kNoSegment},
    {"hierarchical",
     "several equal nodes: rail all-gather, then node all-gather",
     hierarchical_cost,
     two_level_even,
     run_two_level<Collective::all_gather>,
     {},
     /*forced_falls_back=*/true},
    {"ring", "n-1 steps, each forwarding the block received last, straight into place", ring_cost,
     anywhere, ring_run},
};

}  // namespace

std::span<const Algorithm> all_gather_table() { return kAllGather; }

}  // namespace strata::algo
