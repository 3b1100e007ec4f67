// Shared-memory all-reduce: per chunk, stage -> reduce own sub-block from every slot -> copy the
// other sub-blocks back. See shm_collectives.hpp for the scheme and its cost.
#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <cstring>

#include "collectives/algorithms.hpp"
#include "collectives/reduce_kernels.hpp"
#include "collectives/copy_kernel.hpp"
#include "collectives/shm_collectives.hpp"
#include "collectives/shm_sync.hpp"

namespace strata::coll {

using shm::SlotHeader;
using namespace shm_sync;

namespace {

// Small messages: one phase. Every rank stages its whole input, then reduces all slots itself in
// rank order (the same order everywhere, so every rank computes the same bits). One round of
// cross-core signalling instead of three; the redundant arithmetic is negligible at this size.
void all_reduce_small(ShmContext c, const void* in, void* out, size_t count, DataType dt,
                      ReduceOp op) {
  auto& s = c.seg;
  const int n = s.size(), r = s.rank();
  const size_t bytes = count * dtype_size(dt);
  const Expect e{Kind::all_reduce, bytes};
  const uint64_t seq = s.next_chunk++;
  if (seq + 1 > uint64_t(s.depth())) wait_all(s, &SlotHeader::consumed, seq + 1 - s.depth(), c.deadline, c.where);
  std::memcpy(s.buffer(r, seq), in, bytes);
  publish_written(s, seq, e);
  for (int j = 0; j < n; ++j) wait_written(s, j, seq, e, c.deadline, c.where);
  reduce(out, s.buffer(0, seq), s.buffer(1, seq), count, dt, op);
  for (int j = 2; j < n; ++j) reduce(out, out, s.buffer(j, seq), count, dt, op);
  if (op == ReduceOp::avg) divide_by(out, count, dt, n);
  publish(s, &SlotHeader::consumed, seq + 1);
}

}  // namespace

// Tiny messages (one cache line): every rank writes its input and the line's number in one
// cache line and reduces all lines in rank order. One cross-core transfer per peer on the
// critical path, no staging buffer to free first.
uint64_t shm_tiny_all_reduce_post(shm::Segment& s, const void* in, size_t count, DataType dt) {
  const uint64_t number = ++s.next_line;
  publish_line(s, number, {Kind::all_reduce, count * dtype_size(dt)}, in);
  return number;
}

namespace {

void reduce_lines(shm::Segment& s, uint64_t number, void* out, size_t count, DataType dt,
                  ReduceOp op, const Expect& e, const ShmContext* wait) {
  auto line = [&](int j) {
    return wait ? wait_line(s, j, number, e, wait->deadline, wait->where)
                : s.header(j).lines[number % 2].payload;
  };
  const int n = s.size();
  const uint8_t* first = line(0);
  reduce(out, first, line(1), count, dt, op);
  for (int j = 2; j < n; ++j) reduce(out, out, line(j), count, dt, op);
  if (op == ReduceOp::avg) divide_by(out, count, dt, n);
}

}  // namespace

bool shm_tiny_all_reduce_try_finish(shm::Segment& s, uint64_t number, void* out, size_t count,
                                    DataType dt, ReduceOp op, int polls) {
  const Expect e{Kind::all_reduce, count * dtype_size(dt)};
  for (int j = 0; j < s.size(); ++j) {
    for (int i = 0; !line_ready(s, j, number, e); ++i) {
      if (i >= polls) return false;
      // Oversubscribed, the peer is likely waiting for this very core: hand it over.
      if (s.oversubscribed()) sched_yield();
      else _mm_pause();
    }
  }
  reduce_lines(s, number, out, count, dt, op, e, nullptr);
  return true;
}

void shm_tiny_all_reduce_finish(ShmContext c, uint64_t number, void* out, size_t count,
                                DataType dt, ReduceOp op) {
  reduce_lines(c.seg, number, out, count, dt, op, {Kind::all_reduce, count * dtype_size(dt)}, &c);
}

void shm_all_reduce(ShmContext c, const void* in, void* out, size_t count, DataType dt,
                    ReduceOp op) {
  auto& s = c.seg;
  if (s.size() > 1 && count * dtype_size(dt) <= shm::kLineBytes) {
    shm_tiny_all_reduce_finish(c, shm_tiny_all_reduce_post(s, in, count, dt), out, count, dt,
                               op);
    return;
  }
  if (s.size() > 1 && count * dtype_size(dt) <= kShmSmallBytes) {
    all_reduce_small(c, in, out, count, dt, op);
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
  auto put = count * es >= kStreamingBytes && in != out ? copy_streaming : copy;
  StagingCopy stage(c.stores.all_reduce, count * es, s.oversubscribed());
  const Expect e{Kind::all_reduce, count * es};
  for (size_t off = 0; off < count; off += per_chunk) {
    const size_t k = std::min(per_chunk, count - off);
    const uint64_t seq = s.next_chunk++;
    const Blocks sub{k, n};
    // 1. Stage my chunk once every rank has finished with this buffer's previous use.
    if (seq + 1 > uint64_t(s.depth())) wait_all(s, &SlotHeader::consumed, seq + 1 - s.depth(), c.deadline, c.where);
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
      if (j != r) reduce(res, res, s.buffer(j, seq) + o, len, dt, op);
    }
    if (op == ReduceOp::avg) divide_by(res, len, dt, n);
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

}  // namespace strata::coll
