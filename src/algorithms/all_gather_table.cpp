// All-gather's algorithms, in order of preference on equal cost.
#include <cstring>

#include "algorithms/table_helpers.hpp"
#include "shm/sync.hpp"

namespace strata::algo {
namespace {

using namespace tables;

constexpr Algorithm kAllGather[] = {
    {"shm", "one node: stage in the segment, every rank copies every block out",
     segment_movement<false>, on_segment,
     [](Exec& e, const Args& a) {
       shm::all_gather(e.shm_context(shm::call_word(a.dtype, -1, -1)), a.in, a.out, a.bytes());
     },
     kNoSegment},
    {"hierarchical",
     "several equal nodes: rail all-gather, then node all-gather",
     on_group<cost::hierarchical_all_gather>,
     two_level_even,
     hierarchical_all_gather,
     {},
     /*forced_falls_back=*/true},
    {"ring", "n-1 steps, each forwarding the block received last, straight into place",
     on_network<cost::ring_all_gather>, anywhere,
     [](Exec& e, const Args& a) {
       const size_t es = dtype_size(a.dtype);
       auto* mine = static_cast<uint8_t*>(a.out) + a.count * size_t(e.p2p.rank()) * es;
       if (a.in != mine) std::memcpy(mine, a.in, a.count * es);
       ring_all_gather(e.p2p, a.out, kernels::EqualBlocks{a.count}, es);
     }},
};

}  // namespace

std::span<const Algorithm> all_gather_table() { return kAllGather; }

}  // namespace strata::algo
