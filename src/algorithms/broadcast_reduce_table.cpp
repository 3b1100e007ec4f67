// Broadcast's and reduce's algorithms, in order of preference on equal cost.
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
  shm::broadcast(e.shm_context(shm::call_word(a.dtype, -1, a.root)), a.out, a.bytes(), a.root);
}

double binomial_broadcast_cost(const GroupView& g, size_t B) {
  return cost::binomial(cost::network(g), g.n, double(B), false);
}
void binomial_broadcast_run(Exec& e, const Args& a) {
  binomial_broadcast(e.p2p, a.out, a.bytes(), a.root);
}

double binomial_reduce_cost(const GroupView& g, size_t B) {
  return cost::binomial(cost::network(g), g.n, double(B), true);
}
void binomial_reduce_run(Exec& e, const Args& a) {
  binomial_reduce(e.p2p, a.in, a.out, a.count, a.dtype, a.op, a.root);
}

constexpr Algorithm kBroadcast[] = {
    {"shm", "one node: the root stages in the segment, every rank copies out", shm_cost, on_segment,
     shm_run, kNoSegment},
    {"binomial", "ceil(log2 n) steps down a binomial tree from the root", binomial_broadcast_cost,
     anywhere, binomial_broadcast_run},
};

constexpr Algorithm kReduce[] = {
    {"binomial", "ceil(log2 n) steps up a binomial tree to the root, reducing on the way",
     binomial_reduce_cost, anywhere, binomial_reduce_run},
};

}  // namespace

std::span<const Algorithm> broadcast_table() { return kBroadcast; }
std::span<const Algorithm> reduce_table() { return kReduce; }

}  // namespace strata::algo
