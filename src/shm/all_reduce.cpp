// Shared-memory all-reduce: per chunk, stage -> reduce own sub-block from every slot -> copy the
// other sub-blocks back. See collectives.hpp for the scheme and its cost.
#include <immintrin.h>
#include <sched.h>

#include <algorithm>

#include "kernels/blocks.hpp"
#include "kernels/copy_kernel.hpp"
#include "kernels/reduce_kernels.hpp"
#include "shm/collectives.hpp"
#include "shm/sync.hpp"

namespace strata::shm {

namespace {

// Small messages: one phase. Every rank publishes its whole input, then reduces every rank's in
// rank order (the same order everywhere, so every rank computes the same bits): one round of
// cross-core signalling instead of three; the redundant arithmetic is negligible at this size.
// Up to shm::kLineBytes the input travels in the rank's cache line with the line's number, with
// no staging buffer to free first; above, in the next staging buffer of its slot, numbered as a
// chunk.
bool in_a_line(size_t bytes) { return bytes <= shm::kLineBytes; }

Expect small_expect(size_t count, DataType dt, ReduceOp op) {
  return {Kind::all_reduce, count * dtype_size(dt), call_word(dt, int(op), -1)};
}

// True when `rank` has published small all-reduce `number` and it matches `e`.
bool small_ready(shm::Segment& s, int rank, uint64_t number, const Expect& e) {
  return in_a_line(e.bytes) ? line_ready(s, rank, number, e) : written_ready(s, rank, number, e);
}

// Reduces every rank's input to small all-reduce `number` into `out`, rank j's read from
// `input(j)`, then frees this rank's hold on the staging buffers.
template <typename Input>
void reduce_small(shm::Segment& s, uint64_t number, void* out, size_t count, DataType dt,
                  ReduceOp op, Input input) {
  const int n = s.size();
  const uint8_t* first = input(0);
  kernels::reduce(out, first, input(1), count, dt, op);
  for (int j = 2; j < n; ++j) kernels::reduce(out, out, input(j), count, dt, op);
  if (op == ReduceOp::avg) kernels::divide_by(out, count, dt, n);
  if (!in_a_line(count * dtype_size(dt))) publish(s, &SlotHeader::consumed, number + 1);
}

}  // namespace

bool small_all_reduce_can_post(shm::Segment& s, size_t bytes) {
  if (s.size() < 2 || bytes > kSmallBytes) return false;  // all_reduce takes the chunked path
  return in_a_line(bytes) || buffer_free(s, s.next_chunk);
}

uint64_t small_all_reduce_publish(shm::Segment& s, const void* in, size_t count, DataType dt,
                                  ReduceOp op) {
  const Expect e = small_expect(count, dt, op);
  if (in_a_line(e.bytes)) {
    const uint64_t number = ++s.next_line;
    publish_line(s, number, e, in);
    return number;
  }
  const uint64_t seq = s.next_chunk++;
  kernels::copy(s.buffer(s.rank(), seq), in, e.bytes);
  publish_written(s, seq, e);
  return seq;
}

uint64_t small_all_reduce_post(Context c, const void* in, size_t count, DataType dt, ReduceOp op) {
  auto& s = c.seg;
  if (!in_a_line(count * dtype_size(dt))) wait_buffer_free(s, s.next_chunk, c.deadline, c.where);
  return small_all_reduce_publish(s, in, count, dt, op);
}

bool small_all_reduce_try_finish(shm::Segment& s, uint64_t number, void* out, size_t count,
                                 DataType dt, ReduceOp op, int polls) {
  const Expect e = small_expect(count, dt, op);
  for (int j = 0; j < s.size(); ++j) {
    for (int i = 0; !small_ready(s, j, number, e); ++i) {
      if (i >= polls) return false;
      // Oversubscribed, the peer is likely waiting for this very core: hand it over.
      if (s.oversubscribed())
        sched_yield();
      else
        _mm_pause();
    }
  }
  reduce_small(s, number, out, count, dt, op, [&](int j) -> const uint8_t* {
    return in_a_line(e.bytes) ? s.header(j).lines[number % 2].payload : s.buffer(j, number);
  });
  return true;
}

void small_all_reduce_finish(Context c, uint64_t number, void* out, size_t count, DataType dt,
                             ReduceOp op) {
  auto& s = c.seg;
  const Expect e = small_expect(count, dt, op);
  reduce_small(s, number, out, count, dt, op, [&](int j) -> const uint8_t* {
    if (in_a_line(e.bytes)) return wait_line(s, j, number, e, c.deadline, c.where);
    wait_written(s, j, number, e, c.deadline, c.where);
    return s.buffer(j, number);
  });
}

void all_reduce(Context c, const void* in, void* out, size_t count, DataType dt, ReduceOp op) {
  auto& s = c.seg;
  if (s.size() > 1 && count * dtype_size(dt) <= kSmallBytes) {
    small_all_reduce_finish(c, small_all_reduce_post(c, in, count, dt, op), out, count, dt, op);
    return;
  }
  const int n = s.size(), r = s.rank();
  const size_t es = dtype_size(dt);
  // Keep chunks a multiple of 64 bytes per sub-block so sub-blocks stay cache-line aligned.
  const size_t per_chunk = std::max<size_t>(s.chunk_bytes() / es / (64 * n) * (64 * n), n);
  auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  // Results of a message larger than the caches go to the caller's buffer with streaming stores,
  // unless in place: there each chunk's lines were just read to stage it and are still cached,
  // and streaming into cached lines evicts them first (in-place 64 MiB: 9 -> 12-17 GB/s).
  auto put = in != out && stream_results(s, count * es, count * es) ? kernels::copy_streaming
                                                                    : kernels::copy;
  StagingCopy stage(&c.write_modes.all_reduce, count * es, &s);
  const Expect e{Kind::all_reduce, count * es, call_word(dt, int(op), -1)};
  for (size_t off = 0; off < count; off += per_chunk) {
    const size_t k = std::min(per_chunk, count - off);
    const uint64_t seq = s.next_chunk++;
    const kernels::Blocks sub{k, n};
    // 1. Stage my chunk once every rank has finished with this buffer's previous use.
    wait_buffer_free(s, seq, c.deadline, c.where);
    uint8_t* mine = s.buffer(r, seq);
    stage(mine, src + off * es, k * es);
    publish_written(s, seq, e);
    // 2. Fold every peer's copy of my sub-block into mine, in place in my slot (only I touch
    //    that part of it), publish it for the peers, then write it out. Only this rank computes
    //    this sub-block, so every rank ends with the same bits.
    for (int j = 0; j < n; ++j) wait_written(s, j, seq, e, c.deadline, c.where);
    const size_t o = sub.offset(r) * es, len = sub.count(r);
    uint8_t* res = mine + o;
    for (int j = 0; j < n; ++j) {
      if (j != r) kernels::reduce(res, res, s.buffer(j, seq) + o, len, dt, op);
    }
    if (op == ReduceOp::avg) kernels::divide_by(res, len, dt, n);
    publish(s, &SlotHeader::reduced, seq + 1);
    put(dst + off * es + o, res, len * es);
    // 3. Collect everyone else's reduced sub-block.
    for (int j = 0; j < n; ++j) {
      if (j == r) continue;
      wait_for(s, j, &SlotHeader::reduced, seq + 1, c.deadline, c.where);
      const size_t oj = sub.offset(j) * es;
      put(dst + off * es + oj, s.buffer(j, seq) + oj, sub.count(j) * es);
    }
    publish(s, &SlotHeader::consumed, seq + 1);
  }
  stage.done();
}

}  // namespace strata::shm
