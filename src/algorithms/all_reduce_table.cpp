// All-reduce's algorithms, in order of preference on equal cost.
#include "algorithms/table_helpers.hpp"

namespace strata::algo {
namespace {

using namespace tables;

double segment_cost(const GroupView& g, size_t B) {
  return cost::segment_all_reduce(cost::segment(g), g.n, double(B));
}

// Small all-reduces in one phase (shm/collectives.hpp; each hook declines above its size).
constexpr Now kSegmentNow = {
    [](shm::Segment& s, const Args& a) -> std::optional<uint64_t> {
      if (!shm::small_all_reduce_can_post(s, a.bytes())) return std::nullopt;
      return shm::small_all_reduce_publish(s, a.in, a.count, a.dtype, a.op);
    },
    [](shm::Segment& s, uint64_t number, const Args& a, int polls) {
      return shm::small_all_reduce_try_finish(s, number, a.out, a.count, a.dtype, a.op, polls);
    },
    [](Exec& e, uint64_t number, const Args& a) {
      shm::small_all_reduce_finish(e.shm_context(), number, a.out, a.count, a.dtype, a.op);
    },
};

constexpr Algorithm kAllReduce[] = {
    {"shm", "one node: stage in the segment, reduce 1/n from every slot, copy out", segment_cost,
     on_segment,
     [](Exec& e, const Args& a) {
       shm::all_reduce(e.shm_context(), a.in, a.out, a.count, a.dtype, a.op);
     },
     kNoSegment, false, &kSegmentNow},
    {"hierarchical",
     "several nodes: node reduce-scatter, rail all-reduce, node all-gather",
     on_group<cost::hierarchical_all_reduce>,
     two_level,
     hierarchical_all_reduce,
     {},
     /*forced_falls_back=*/true},
    {"recursive_doubling", "log2 p exchanges of the whole vector (fold to a power of two)",
     on_network<cost::recursive_doubling>, anywhere, p2p_reduction<recursive_doubling_all_reduce>},
    {"ring", "ring reduce-scatter then ring all-gather, pipelined in chunks",
     on_network<cost::ring_all_reduce>, anywhere, p2p_reduction<ring_all_reduce>},
    {"halving_doubling", "reduce-scatter by halving, all-gather by doubling (Rabenseifner)",
     on_network<cost::halving_doubling>, anywhere, p2p_reduction<halving_doubling_all_reduce>},
};

}  // namespace

std::span<const Algorithm> all_reduce_table() { return kAllReduce; }

}  // namespace strata::algo
