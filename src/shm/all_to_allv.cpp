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
// once every peer has consumed the rounds. When every sender left its input in its own memory,
// the copies are shared out instead: each block is partly written by its sender, partly read by
// its receiver, so that every rank copies about as much (balance() below).
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/copy_kernel.hpp"
#include "shm/collectives.hpp"
#include "shm/sync.hpp"
#include "shm/writer_input.hpp"

namespace strata::shm {
namespace {

// A rank's header: its n send counts, its n receive counts, its n send and n receive
// displacements (elements), then its input's and its output's addresses (the displacements and
// addresses are read only where inputs are left unstaged).
size_t header_bytes(int n) { return ((4 * size_t(n) + 2) * sizeof(uint64_t) + 63) / 64 * 64; }

// The count matrix every rank reads from the headers: send[i * n + j] elements from i to j.
struct Matrix {
  int n;
  std::vector<uint64_t> send, recv;  // recv[j * n + i]: what j expects from i
  std::vector<uint64_t> displ;       // displ[i * n + j]: where i's block for j starts
  std::vector<uint64_t> rdispl;      // rdispl[j * n + i]: where j's block from i goes
  std::vector<uint64_t> in, out;     // each rank's input and output, in its own memory
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

// Balanced single copy: when every rank left its input in its own memory, the block from i to j
// may be copied by j (a read out of i's memory) or by i (a write into j's): the first
// push[i * n + j] bytes by i, the rest by j. Every rank derives the same split from the count
// matrix, moving each block's bytes from the busier of its two ends to the other until their
// loads meet (in whole cache lines), so a skewed exchange (one hot receiver, as a router makes)
// spreads its copies over all ranks instead of queueing them on the hot one.
std::vector<uint64_t> balance(const Matrix& m, size_t es) {
  const int n = m.n;
  std::vector<uint64_t> load(size_t(n), 0), push(size_t(n) * size_t(n), 0);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) load[j] += m.sent(i, j) * es;  // all pulled, own blocks too
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        if (i == j) continue;
        uint64_t& p = push[size_t(i) * n + j];
        const uint64_t block = m.sent(i, j) * es;
        if (load[j] > load[i]) {
          const uint64_t t = std::min(block - p, (load[j] - load[i]) / 2) & ~uint64_t(63);
          p += t, load[j] -= t, load[i] += t;
        } else {
          const uint64_t t = std::min(p, (load[i] - load[j]) / 2) & ~uint64_t(63);
          p -= t, load[i] -= t, load[j] += t;
        }
      }
    }
  }
  return push;
}

// The part [lo, hi) of a stream block [from, from + len) that falls in round [base, base + cap).
struct Piece {
  uint64_t lo, hi;
  bool empty() const { return lo >= hi; }
};
Piece overlap(uint64_t from, uint64_t len, uint64_t base, uint64_t cap) {
  return {std::max(from, base), std::min(from + len, base + cap)};
}

// This rank's part of a balanced exchange: the blocks' bytes it pulls and pushes.
void exchange_balanced(Segment& s, const Matrix& m, const std::vector<uint64_t>& push, size_t es,
                       const ErrorContext& where) {
  const int n = m.n, r = s.rank();
  for (int j = 0; j < n; ++j) {
    if (j == r) continue;
    const int32_t pid = s.header(j).pid.load(std::memory_order_relaxed);
    const uint64_t from_j = m.sent(j, r) * es, pushed = push[size_t(j) * n + r];
    if (pushed < from_j) {  // the rest of j's block for this rank, out of j's memory
      auto* to = reinterpret_cast<uint8_t*>(m.out[r]) + m.rdispl[size_t(r) * n + j] * es + pushed;
      const auto* at = reinterpret_cast<const uint8_t*>(m.in[j]) + m.displ[size_t(j) * n + r] * es;
      ++s.process_reads;
      if (const int err = read_process(pid, to, at + pushed, from_j - pushed); err != 0) {
        cross_process_failed(s, j, pid, from_j - pushed, false, err, where);
      }
    }
    if (const uint64_t mine = push[size_t(r) * n + j]; mine > 0) {  // the start of mine for j
      auto* to = reinterpret_cast<uint8_t*>(m.out[j]) + m.rdispl[size_t(j) * n + r] * es;
      const auto* at = reinterpret_cast<const uint8_t*>(m.in[r]) + m.displ[size_t(r) * n + j] * es;
      ++s.process_writes;
      if (const int err = write_process(pid, to, at, mine); err != 0) {
        cross_process_failed(s, j, pid, mine, true, err, where);
      }
    }
  }
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
  // Stamped with no size: the ranks' sizes differ, and the header carries the counts.
  const Expect e{Kind::all_to_allv, 0, c.call};
  // Rank 0 learns whether to leave inputs unstaged, and the others follow it: the copies are
  // shared out only when every input is unstaged (balance()), and ranks timing their own calls
  // of their own sizes would not choose alike. So a rank that moves enough to learn waits for
  // rank 0's first stamp before it stages (small calls do not wait: mixed modes stay correct).
  const uint64_t first0 = s.next_chunk++;
  const ShmWriteMode policy = config().shm_write_mode;
  const size_t floor = s.oversubscribed() ? SizedWriteModeChoice::kLearnFromBytesOversubscribed
                                          : SizedWriteModeChoice::kLearnFromBytes;
  std::optional<bool> leader;
  if (r != 0 && s.single_copy_possible() &&
      (policy == ShmWriteMode::single_copy ||
       (policy == ShmWriteMode::learn && my_stream + my_in >= floor))) {
    wait_written(s, 0, first0, e, c.deadline, c.where);
    leader = in_writer_memory(s, 0, first0);
  }
  WriterInput input(c, &c.write_modes.all_to_allv, src, extent, my_stream, leader);
  std::shared_ptr<Window> held;
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
  wait_buffer_free(s, first0, c.deadline, c.where);
  uint8_t* mine0 = s.buffer(r, first0);
  auto* head = reinterpret_cast<uint64_t*>(mine0);
  for (int j = 0; j < n; ++j) {
    head[j] = send_counts[j], head[n + j] = recv_counts[j], head[2 * n + j] = send_displs[j];
    head[3 * n + j] = recv_displs[j];
  }
  head[4 * n] = reinterpret_cast<uint64_t>(src), head[4 * n + 1] = reinterpret_cast<uint64_t>(dst);
  const uint64_t cap0 = chunk - header;
  stage_round(mine0 + header, 0, cap0);
  input.publish(first0, e, 0);
  const size_t nn = size_t(n) * size_t(n);
  Matrix m{n,
           std::vector<uint64_t>(nn),
           std::vector<uint64_t>(nn),
           std::vector<uint64_t>(nn),
           std::vector<uint64_t>(nn),
           std::vector<uint64_t>(size_t(n)),
           std::vector<uint64_t>(size_t(n))};
  bool balanced = true;  // every input left in its rank's memory
  for (int j = 0; j < n; ++j) {
    if (j != r) wait_written(s, j, first0, e, c.deadline, c.where);
    const auto* theirs = reinterpret_cast<const uint64_t*>(s.buffer(j, first0));
    std::copy(theirs, theirs + n, m.send.begin() + ptrdiff_t(j) * n);
    std::copy(theirs + n, theirs + 2 * n, m.recv.begin() + ptrdiff_t(j) * n);
    std::copy(theirs + 2 * n, theirs + 3 * n, m.displ.begin() + ptrdiff_t(j) * n);
    std::copy(theirs + 3 * n, theirs + 4 * n, m.rdispl.begin() + ptrdiff_t(j) * n);
    m.in[j] = theirs[4 * n], m.out[j] = theirs[4 * n + 1];
    balanced = balanced && in_writer_memory(s, j, first0);
  }
  if (const Disagreement d = disagreement(m, r); !d.what.empty()) {
    give_up(s, d.peer, c.where, d.what);  // every rank finds the same pair
  }
  std::memcpy(dst + recv_displs[r] * es, src + send_displs[r] * es, send_counts[r] * es);
  if (balanced && n > 1) {
    exchange_balanced(s, m, balance(m, es), es, c.where);
    publish(s, &SlotHeader::consumed, first0 + 1);
    input.finish();  // every peer's reads of this input and writes into this output are done
    return;
  }
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
