// The rooted collectives' algorithms (broadcast, reduce, gather, scatter) and the barrier's, in
// order of preference on equal cost.
#include "algorithms/table_helpers.hpp"
#include "shm/sync.hpp"

namespace strata::algo {
namespace {

using namespace tables;

constexpr Algorithm kBroadcast[] = {
    {"shm", "one node: the root stages in the segment (or relays its output), the rest copy out",
     segment_movement<false>, on_segment,
     [](Exec& e, const Args& a) {
       shm::broadcast(e.shm_context(shm::call_word(a.dtype, -1, a.root)), a.in, a.out, a.bytes(),
                      a.root);
     },
     kNoSegment},
    {"binomial", "ceil(log2 n) steps down a binomial tree from the root",
     on_network<cost::binomial, false>, anywhere,
     [](Exec& e, const Args& a) { binomial_broadcast(e.p2p, a.in, a.out, a.bytes(), a.root); }},
};

constexpr Algorithm kReduce[] = {
    {"binomial", "ceil(log2 n) steps up a binomial tree to the root, reducing on the way",
     on_network<cost::binomial, true>, anywhere,
     [](Exec& e, const Args& a) {
       binomial_reduce(e.p2p, a.in, a.out, a.count, a.dtype, a.op, a.root);
     }},
};

constexpr Algorithm kGather[] = {
    {"linear", "the root receives every rank's block at once", on_network<cost::linear>, anywhere,
     p2p_rooted<linear_gather>},
};

constexpr Algorithm kScatter[] = {
    {"linear", "the root sends every rank its block at once", on_network<cost::linear>, anywhere,
     p2p_rooted<linear_scatter>},
};

constexpr Algorithm kBarrier[] = {
    {"dissemination", "ceil(log2 n) rounds: signal r + 2^k, wait for r - 2^k",
     on_network<cost::dissemination>, anywhere,
     [](Exec& e, const Args&) { dissemination_barrier(e.p2p); }},
};

}  // namespace

std::span<const Algorithm> broadcast_table() { return kBroadcast; }
std::span<const Algorithm> reduce_table() { return kReduce; }
std::span<const Algorithm> gather_table() { return kGather; }
std::span<const Algorithm> scatter_table() { return kScatter; }
std::span<const Algorithm> barrier_table() { return kBarrier; }

}  // namespace strata::algo
