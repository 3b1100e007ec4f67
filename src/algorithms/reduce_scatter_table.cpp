// Reduce-scatter's algorithms, in order of preference on equal cost.
#include "algorithms/table_helpers.hpp"

namespace strata::algo {
namespace {

using namespace tables;

constexpr Algorithm kReduceScatter[] = {
    {"shm", "one node: stage in the segment, each rank reduces its block from every slot",
     segment_movement<true>, on_segment,
     [](Exec& e, const Args& a) {
       shm::reduce_scatter(e.shm_context(), a.in, a.out, a.count, a.dtype, a.op);
     },
     kNoSegment},
    {"hierarchical",
     "several equal nodes: node reduce-scatter, then rail reduce-scatter",
     on_group<cost::hierarchical_reduce_scatter>,
     two_level_even,
     hierarchical_reduce_scatter,
     {},
     /*forced_falls_back=*/true},
    {"ring", "n-1 steps, each block's running partial passed on and added to, pipelined",
     on_network<cost::ring_reduce_scatter>, anywhere,
     [](Exec& e, const Args& a) {
       ring_reduce_scatter(e.p2p, a.in, a.out, kernels::EqualBlocks{a.count}, a.dtype, a.op);
     }},
};

}  // namespace

std::span<const Algorithm> reduce_scatter_table() { return kReduceScatter; }

}  // namespace strata::algo
