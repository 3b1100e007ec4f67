// All-to-all's algorithms (equal blocks) and all_to_allv's (any counts), in order of preference
// on equal cost. all_to_allv chooses as for 0 bytes (its ranks' sizes differ): its entries' order
// by cost must not turn with the size.
#include "algorithms/table_helpers.hpp"
#include "shm/sync.hpp"

namespace strata::algo {
namespace {

using namespace tables;

void pairwise_run(Exec& e, const Args& a) {
  pairwise_all_to_allv(e.p2p, a.in, a.send_counts, a.send_displs, a.out, a.recv_counts,
                       a.recv_displs, dtype_size(a.dtype));
}

constexpr Algorithm kAllToAll[] = {
    {"shm", "one node: stage in the segment, every rank copies its blocks out",
     segment_movement<false>, on_segment,
     [](Exec& e, const Args& a) {
       shm::all_to_all(e.shm_context(shm::call_word(a.dtype, -1, -1)), a.in, a.out, a.bytes());
     },
     kNoSegment},
    {"hierarchical",
     "several equal nodes: blocks sorted in the node, one message per node pair",
     on_group<cost::hierarchical_all_to_all>,
     two_level_even,
     hierarchical_all_to_all,
     {},
     /*forced_falls_back=*/true},
    {"pairwise", "n-1 steps: at step k send to r+k, receive from r-k", on_group<cost::pairwise>,
     anywhere, pairwise_run},
};

constexpr Algorithm kAllToAllv[] = {
    {"shm", "one node: counts exchanged in the first round, every stream staged, blocks copied out",
     segment_movement<false>, on_segment,
     [](Exec& e, const Args& a) {
       shm::all_to_allv(e.shm_context(shm::call_word(a.dtype, -1, -1)), a.in, a.send_counts,
                        a.send_displs, a.out, a.recv_counts, a.recv_displs, dtype_size(a.dtype));
     },
     kNoSegment},
    {"hierarchical",
     "several equal nodes: counts first; by their total, blocks per node pair or pairwise",
     on_group<cost::hierarchical_all_to_allv>,
     two_level_even,
     hierarchical_all_to_allv,
     {},
     /*forced_falls_back=*/true},
    {"pairwise", "n-1 steps: at step k send to r+k, receive from r-k", on_group<cost::pairwise>,
     anywhere, pairwise_run},
};

}  // namespace

std::span<const Algorithm> all_to_all_table() { return kAllToAll; }
std::span<const Algorithm> all_to_allv_table() { return kAllToAllv; }

}  // namespace strata::algo
