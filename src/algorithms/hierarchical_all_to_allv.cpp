// All-to-allv across nodes of equal size (docs/algorithms.md, "Hierarchical all_to_allv").
//
// The counts travel first: within the node (what each local peer sends every rank with my local
// index, and each rank's total), then along my rail (what my node sends each rail peer, and the
// node's total). After those two small exchanges every rank knows the size of the whole exchange,
// the same number on every rank, so all choose the same way to move the blocks, by the cost
// model at the size the choice could not see (all_to_allv's choice is made for 0 bytes):
//   - aggregated, as hierarchical_all_to_all: blocks sorted by local index within the node, then
//     one message per node pair on every rail; it saves latency;
//   - pairwise over the whole group; it saves the node leg's copies, which do not overlap the
//     wire (2 x 4 ranks at 1 Gbit/s: 10-14 % slower aggregated from 16 KiB up).
// Each receiver compares every sender's claim with what it expects before the blocks move, moves
// them by the claims (no rank waits on a message never sent), then fails naming both ranks and
// tells the others, who fail at their next call.
#include <cstring>
#include <numeric>
#include <string>

#include "algorithms/algorithms.hpp"
#include "algorithms/cost_model.hpp"
#include "algorithms/legs.hpp"
#include "base/log.hpp"
#include "transport/transport.hpp"

namespace strata::algo {
namespace {

size_t sum(const std::vector<size_t>& v) { return std::accumulate(v.begin(), v.end(), size_t(0)); }

// Displacements of blocks laid out back to back.
std::vector<size_t> packed(const std::vector<size_t>& counts) {
  std::vector<size_t> d(counts.size());
  for (size_t i = 1; i < counts.size(); ++i) d[i] = d[i - 1] + counts[i - 1];
  return d;
}

// The first sender whose claim differs from what this rank expects, worded as the shared
// segment words it; empty when every claim holds.
std::string disagreement(const Args& a, const std::vector<size_t>& claimed, size_t es, int me,
                         int& sender) {
  for (size_t r = 0; r < claimed.size(); ++r) {
    if (claimed[r] == a.recv_counts[r] * es) continue;
    sender = int(r);
    return "count mismatch in all_to_allv: rank " + std::to_string(r) + " sends " +
           std::to_string(claimed[r] / es) + " elements to rank " + std::to_string(me) +
           ", which expects " + std::to_string(a.recv_counts[r]) + " from it";
  }
  return {};
}

}  // namespace

void hierarchical_all_to_allv(Exec& e, const Args& a) {
  Legs h{e};
  const auto& ranks_of = h.t.layout.ranks_of;
  const size_t nodes = ranks_of.size(), local = size_t(h.t.local_size);
  const size_t es = dtype_size(a.dtype), n = nodes * local;
  const int me = e.p2p.rank();
  auto rank_at = [&](size_t m, size_t i) { return size_t(ranks_of[m][i]); };
  auto u64 = [](std::vector<uint64_t>& v) { return view(v.data(), 0, v.size(), DataType::u64); };

  // Node leg of counts: to local peer i, the bytes I send (m, i) for every node m, then my total.
  const size_t row = nodes + 1;
  std::vector<uint64_t> to(local * row), from(local * row);
  size_t my_total = 0;
  for (size_t r = 0; r < n; ++r) my_total += a.send_counts[r] * es;
  for (size_t i = 0; i < local; ++i) {
    for (size_t m = 0; m < nodes; ++m) to[i * row + m] = a.send_counts[rank_at(m, i)] * es;
    to[i * row + nodes] = my_total;
  }
  h.all_to_all(Level::node, u64(to), u64(from), local)();
  // Rail leg of counts: to rail peer m, what each local peer i sends (m, me), then my node's
  // total; back, what (m, i) sends me.
  const size_t rail_row = local + 1;
  size_t node_total = 0;
  for (size_t i = 0; i < local; ++i) node_total += from[i * row + nodes];
  std::vector<uint64_t> claims(nodes * rail_row), answers(nodes * rail_row);
  for (size_t m = 0; m < nodes; ++m) {
    for (size_t i = 0; i < local; ++i) claims[m * rail_row + i] = from[i * row + m];
    claims[m * rail_row + local] = node_total;
  }
  h.all_to_all(Level::rail, u64(claims), u64(answers), nodes)();
  std::vector<size_t> claimed(n);  // by group rank: the bytes it sends me
  size_t everything = 0;
  for (size_t m = 0; m < nodes; ++m) {
    for (size_t i = 0; i < local; ++i) claimed[rank_at(m, i)] = answers[m * rail_row + i];
    everything += answers[m * rail_row + local];
  }
  int sender = -1;
  const std::string wrong = disagreement(a, claimed, es, me, sender);

  // Every rank chooses from the same total.
  const double per_rank = double(everything) / double(n);
  const bool aggregate = !e.view || cost::hierarchical_all_to_all(*e.view, per_rank) <=
                                        cost::pairwise(*e.view, per_rank);
  STRATA_LOG(TRACE, "COLL") << "all_to_allv on " << e.where.group << ": " << everything
                            << " bytes in all, "
                            << (aggregate ? "aggregated per node" : "pairwise");
  // [m][i]: what (m, i) sent me, in this order (aggregated), or where a claim was wrong.
  std::vector<size_t> got_counts(n);
  for (size_t m = 0; m < nodes; ++m)
    for (size_t i = 0; i < local; ++i) got_counts[m * local + i] = claimed[rank_at(m, i)];
  auto* got = static_cast<uint8_t*>(e.p2p.scratch(sum(got_counts), 0));
  if (aggregate) {
    // My blocks for (m, i), every m, to local peer i, packed [i][m]; back, [i][m]: local peer
    // i's block for (m, me); then re-sorted [m][i] for the rails.
    std::vector<size_t> node_send(local), node_recv(local), rail_send(nodes), rail_recv(nodes);
    std::vector<size_t> in_node(local * nodes);  // from[i][m] without the totals
    for (size_t i = 0; i < local; ++i)
      for (size_t m = 0; m < nodes; ++m) {
        in_node[i * nodes + m] = from[i * row + m];
        node_send[i] += to[i * row + m];
        node_recv[i] += from[i * row + m];
        rail_send[m] += from[i * row + m];
        rail_recv[m] += claimed[rank_at(m, i)];
      }
    const size_t node_in = sum(node_send), node_out = sum(node_recv);
    uint8_t* mine = h.t.scratch(node_in + 2 * node_out);
    uint8_t* by_peer = mine + node_in;
    uint8_t* by_node = by_peer + node_out;
    uint8_t* p = mine;
    for (size_t i = 0; i < local; ++i)
      for (size_t m = 0; m < nodes; ++m) {
        const size_t r = rank_at(m, i);
        std::memcpy(p, static_cast<const uint8_t*>(a.in) + a.send_displs[r] * es, to[i * row + m]);
        p += to[i * row + m];
      }
    h.all_to_allv(Level::node, mine, node_send, by_peer, node_recv)();
    const std::vector<size_t> at = packed(in_node);
    p = by_node;
    for (size_t m = 0; m < nodes; ++m)
      for (size_t i = 0; i < local; ++i) {
        std::memcpy(p, by_peer + at[i * nodes + m], in_node[i * nodes + m]);
        p += in_node[i * nodes + m];
      }
    h.all_to_allv(Level::rail, by_node, rail_send, got, rail_recv)();
    if (wrong.empty()) {
      const std::vector<size_t> got_at = packed(got_counts);
      for (size_t m = 0; m < nodes; ++m)
        for (size_t i = 0; i < local; ++i) {
          const size_t r = rank_at(m, i);
          std::memcpy(static_cast<uint8_t*>(a.out) + a.recv_displs[r] * es,
                      got + got_at[m * local + i], claimed[r]);
        }
    }
  } else if (wrong.empty()) {
    pairwise_all_to_allv(e.p2p, a.in, a.send_counts, a.send_displs, a.out, a.recv_counts,
                         a.recv_displs, es);
  } else {
    // Receive by the claims, into scratch: the senders complete, and the output is untouched.
    std::vector<size_t> by_rank(n);
    for (size_t r = 0; r < n; ++r) by_rank[r] = claimed[r];
    const std::vector<size_t> at = packed(by_rank);
    std::vector<size_t> sc(n), sd(n);
    for (size_t r = 0; r < n; ++r) sc[r] = a.send_counts[r] * es, sd[r] = a.send_displs[r] * es;
    pairwise_all_to_allv(e.p2p, a.in, sc.data(), sd.data(), got, by_rank.data(), at.data(), 1);
  }
  if (wrong.empty()) return;
  if (e.failures) {
    transport::Notice told{transport::Notice::counts, int32_t(sender), int32_t(me), {}};
    wrong.copy(told.reason, sizeof told.reason - 1);
    e.failures->send_notice(told);
  }
  ErrorContext where = e.where;
  where.peer = sender;
  throw Error(ErrorCode::invalid_argument, where, wrong);
}

}  // namespace strata::algo
