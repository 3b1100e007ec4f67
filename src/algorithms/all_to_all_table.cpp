// All-to-all's algorithms (equal blocks) and all_to_allv's (any counts), in order of preference
// on equal cost.
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
  if (a.count > 0) {
    shm::all_to_all(e.shm_context(shm::call_word(a.dtype, -1, -1)), a.in, a.out, a.bytes());
  }
}

double hierarchical_cost(const GroupView& g, size_t B) {
  return cost::hierarchical_all_to_all(g, double(B));
}
void hierarchical_run(Exec& e, const Args& a) {
  if (a.count > 0) run_two_level<Collective::all_to_all>(e, a);
}

double pairwise_cost(const GroupView& g, size_t B) { return cost::pairwise(g, double(B)); }
void pairwise_run(Exec& e, const Args& a) {
  pairwise_all_to_allv(e.p2p, a.in, a.send_counts, a.send_displs, a.out, a.recv_counts,
                       a.recv_displs, dtype_size(a.dtype));
}

constexpr Algorithm kAllToAll[] = {
    {"shm", "one node: stage in the segment, every rank copies its blocks out", shm_cost,
     on_segment, shm_run, kNoSegment},
    {"hierarchical",
     "several equal nodes: blocks sorted in the node, one message per node pair",
     hierarchical_cost,
     two_level_even,
     hierarchical_run,
     {},
     /*forced_falls_back=*/true},
    {"pairwise", "n-1 steps: at step k send to r+k, receive from r-k", pairwise_cost, anywhere,
     pairwise_run},
};

constexpr Algorithm kAllToAllv[] = {
    {"pairwise", "n-1 steps: at step k send to r+k, receive from r-k", pairwise_cost, anywhere,
     pairwise_run},
};

}  // namespace

std::span<const Algorithm> all_to_all_table() { return kAllToAll; }
std::span<const Algorithm> all_to_allv_table() { return kAllToAllv; }

}  // namespace strata::algo
