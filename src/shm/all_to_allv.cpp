// Shared-memory all-to-allv: blocks of any size, as a router makes them (docs/algorithms.md).
//
// No rank knows what its peers send each other, yet all must meet in the same rounds. So the
// first round carries, ahead of its data, each rank's send and receive counts: after it every
// rank knows the whole count matrix, checks it (a sender and a receiver that disagree fail on
// every rank, naming both), and derives the same schedule for the rest. Each rank's blocks for its
// peers form one stream (peers in rank order, its own block apart, copied directly); round t
// carries the next staging buffers' worth of every stream, and a receiver copies out the part of
// each sender's stream that is its block. Rounds are as many as the longest stream needs, so a
// skewed exchange (one hot receiver) takes no more rounds than its biggest sender's bytes.
//
// A sender that leaves its input unstaged (in a symmetric buffer, or single copy:
// writer_input.hpp) stages no stream: its first stamp names where the input lies, its header
// carries its send displacements, and every receiver copies its block from there in the first
// round; the rounds are then as many as the longest staged stream needs. Such a sender returns
// once every peer has consumed the rounds.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/copy_kernel.hpp"
#include "shm/collectives.hpp"
#include "shm/sync.hpp"
#include "shm/writer_input.hpp"

namespace strata::shm {
namespace {

// A rank's header: its n send counts, its n receive counts, then its n send displacements
// (elements; read only where its input lies in a symmetric buffer).
size_t header_bytes(int n) { return (3 * size_t(n) * sizeof(uint64_t) + 63) / 64 * 64; }

// The count matrix every rank reads from the headers: send[i * n + j] elements from i to j.
struct Matrix {
  int n;
  std::vector<uint64_t> send, recv;  // recv[j * n + i]: what j expects from i
  std::vector<uint64_t> displ;       // displ[i * n + j]: where i's block for j starts
  uint64_t sent(int i, int j) const { return send[size_t(i) * size_t(n) + size_t(j)]; }
  uint64_t expected(int j, int i) const { return recv[size_t(j) * size_t(n) + size_t(i)]; }
  /// Bytes of rank i's stream before its block for j (its blocks for the others, in rank order).
  uint64_t offset(int i, int j, size_t es) const {
    uint64_t o = 0;
    for (int k = 0; k < j; ++k) o += k == i ? 0 : sent(i, k) * es;
    return o;
  }
  uint64_t stream(int i, size_t es) const { return offset(i, n, es); }
};

// The first pair whose sender and receiver disagree, as every rank words it (what is empty when
// none), and the peer this rank names: the pair's other rank, or the sender.
struct Disagreement {
  std::string what;
  int peer = -1;
};
Disagreement disagreement(const Matrix& m, int me) {
  for (int i = 0; i < m.n; ++i) {
    for (int j = 0; j < m.n; ++j) {
      if (m.sent(i, j) == m.expected(j, i)) continue;
      return {"count mismatch in all_to_allv: rank " + std::to_string(i) + " sends " +
                  std::to_string(m.sent(i, j)) + " elements to rank " + std::to_string(j) +
                  ", which expects " + std::to_string(m.expected(j, i)) + " from it",
              me == i ? j : i};
    }
  }
  return {};
}

// The part [lo, hi) of a stream block [from, from + len) that falls in round [base, base + cap).
struct Piece {
  uint64_t lo, hi;
  bool empty() const { return lo >= hi; }
};
Piece overlap(uint64_t from, uint64_t len, uint64_t base, uint64_t cap) {
  return {std::max(from, base), std::min(from + len, base + cap)};
}

}  // namespace

void all_to_allv(Context c, const void* in, const size_t* send_counts, const size_t* send_displs,
                 void* out, const size_t* recv_counts, const size_t* recv_displs, size_t es) {
  auto& s = c.seg;
  const int n = s.size(), r = s.rank();
  const uint64_t depth = uint64_t(s.depth()), chunk = s.chunk_bytes();
  const size_t header = header_bytes(n);
  if (header > chunk) {
    throw Error(ErrorCode::invalid_argument, c.where,
                "all_to_allv on the shared segment needs STRATA_SHM_CHUNK of at least " +
                    std::to_string(header) + " bytes for " + std::to_string(n) + " ranks");
  }
  auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  uint64_t my_stream = 0, my_in = 0;
  for (int j = 0; j < n; ++j) {
    my_in += recv_counts[j] * es;
    my_stream += j == r ? 0 : send_counts[j] * es;
  }
  CopyFn put = stream_results(s, my_stream, my_in) ? kernels::copy_streaming : kernels::copy;
  size_t extent = 0;  // of the input, bytes
  for (int j = 0; j < n; ++j) extent = std::max(extent, (send_displs[j] + send_counts[j]) * es);
  WriterInput input(c, c.write_modes.all_to_allv, src, extent, my_stream);
  std::shared_ptr<Window> held;
  // Stamped with no size: the ranks' sizes differ, and the header carries the counts.
  const Expect e{Kind::all_to_allv, 0, c.call};
  // This rank's part of stream round [base, base + cap), staged at `at`.
  std::vector<uint64_t> my_offset(size_t(n) + 1, 0);
  for (int j = 0; j < n; ++j) my_offset[j + 1] = my_offset[j] + (j == r ? 0 : send_counts[j] * es);
  auto stage_round = [&](uint8_t* at, uint64_t base, uint64_t cap) {
    for (int j = 0; j < n && input.staged(); ++j) {
      if (j == r) continue;
      const Piece p = overlap(my_offset[j], send_counts[j] * es, base, cap);
      if (!p.empty()) {
        input.stage(at + (p.lo - base), src + send_displs[j] * es + (p.lo - my_offset[j]),
                    p.hi - p.lo);
      }
    }
  };

  // Round 0: one buffer, the header then the start of the stream.
  const uint64_t first0 = s.next_chunk++;
  wait_buffer_free(s, first0, c.deadline, c.where);
  uint8_t* mine0 = s.buffer(r, first0);
  auto* head = reinterpret_cast<uint64_t*>(mine0);
  for (int j = 0; j < n; ++j) {
    head[j] = send_counts[j], head[n + j] = recv_counts[j], head[2 * n + j] = send_displs[j];
  }
  const uint64_t cap0 = chunk - header;
  stage_round(mine0 + header, 0, cap0);
  input.publish(first0, e, 0);
  const size_t nn = size_t(n) * size_t(n);
  Matrix m{n, std::vector<uint64_t>(nn), std::vector<uint64_t>(nn), std::vector<uint64_t>(nn)};
  for (int j = 0; j < n; ++j) {
    if (j != r) wait_written(s, j, first0, e, c.deadline, c.where);
    const auto* theirs = reinterpret_cast<const uint64_t*>(s.buffer(j, first0));
    std::copy(theirs, theirs + n, m.send.begin() + ptrdiff_t(j) * n);
    std::copy(theirs + n, theirs + 2 * n, m.recv.begin() + ptrdiff_t(j) * n);
    std::copy(theirs + 2 * n, theirs + 3 * n, m.displ.begin() + ptrdiff_t(j) * n);
  }
  if (const Disagreement d = disagreement(m, r); !d.what.empty()) {
    give_up(s, d.peer, c.where, d.what);  // every rank finds the same pair
  }
  std::memcpy(dst + recv_displs[r] * es, src + send_displs[r] * es, send_counts[r] * es);
  uint64_t longest = 0;  // of the staged streams
  std::vector<uint64_t> from(static_cast<size_t>(n)),
      len(static_cast<size_t>(n));  // mine in each staged stream
  for (int j = 0; j < n; ++j) {
    if (j == r) {
      if (input.staged()) longest = std::max(longest, m.stream(j, es));
      continue;
    }
    // A sender that left its input unstaged: my block, straight from there.
    const size_t mine = recv_counts[j] * es;
    if (unstaged(s, j, first0)) {
      copy_written(s, j, first0, nullptr, m.displ[size_t(j) * n + r] * es,
                   {dst + recv_displs[j] * es, mine, 0, mine}, put, held, c.where);
      continue;
    }
    longest = std::max(longest, m.stream(j, es));
    from[j] = m.offset(j, r, es);
    len[j] = mine;
  }
  // Copies out what round [base, base + cap) holds for this rank, senders' data at `data(j)`.
  auto take = [&](uint64_t last, uint64_t base, uint64_t cap, auto data) {
    for (int j = 0; j < n; ++j) {
      const Piece p = overlap(from[j], len[j], base, cap);
      if (p.empty()) continue;  // nothing of mine there: no need to wait for it
      if (last != first0) wait_written(s, j, last, e, c.deadline, c.where);
      put(dst + recv_displs[j] * es + (p.lo - from[j]), data(j) + (p.lo - base), p.hi - p.lo);
    }
  };
  take(first0, 0, cap0, [&](int j) { return s.buffer(j, first0) + header; });
  publish(s, &SlotHeader::consumed, first0 + 1);

  // The rest, in rounds as wide as all_to_all's (data_movement.cpp says why), the same on every
  // rank: they all know the longest stream now.
  const uint64_t widest = s.oversubscribed() ? depth : std::max<uint64_t>(depth / 2, 1);
  for (uint64_t base = cap0; base < longest;) {
    const uint64_t first = s.next_chunk;
    const uint64_t wide = std::clamp<uint64_t>((longest - base + chunk - 1) / chunk, 1, widest);
    const uint64_t span = std::min(wide, depth - first % depth);
    const uint64_t last = first + span - 1, cap = span * chunk;
    s.next_chunk += span;
    wait_buffer_free(s, last, c.deadline, c.where);
    stage_round(s.buffer(r, first), base, cap);
    publish_written(s, last, e);
    take(last, base, cap, [&](int j) { return s.buffer(j, first); });
    publish(s, &SlotHeader::consumed, last + 1);
    base += cap;
  }
  input.finish();
}

}  // namespace strata::shm
