// Synchronisation over a shared segment: publishing a counter and waiting for peers' counters.
// A waiting rank spins briefly (the peer is usually a few hundred nanoseconds behind), then sleeps
// on a futex until the counter moves: with more ranks than cores, a waiting rank must give its
// core to the rank it waits for, and sched_yield loops measured 90% system time at 8 ranks on 2
// cores. The deadline bounds every wait.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "shm/segment.hpp"
#include "strata/types.hpp"

namespace strata::shm {

using Field = Counter SlotHeader::*;

/// Sets this rank's counter `f` to `value` and wakes peers sleeping on it.
void publish(Segment& s, Field f, uint64_t value);

/// This rank has issued `count` collectives on the group. A plain store: nobody sleeps on it.
inline void publish_issued(Segment& s, uint64_t count) {
  s.header(s.rank()).issued.value.store(count, std::memory_order_release);
}

/// True when every rank has issued at least `count` collectives on the group. Never blocks.
bool all_issued(Segment& s, uint64_t count);

/// Waits until `rank`'s counter reaches `value`; throws (timeout, naming the peer) at `deadline`,
/// or at once when `rank` gave up or is in a tiny collective (one cache line) instead.
void wait_for(Segment& s, int rank, Field f, uint64_t value, Clock::time_point deadline,
              const ErrorContext& where);

/// The collective a staged chunk belongs to.
enum class Kind : uint32_t {
  all_reduce = 1,
  reduce_scatter,
  all_gather,
  all_to_all,
  broadcast,
  all_to_allv
};

/// What every rank of a collective must agree on: its kind, its bytes per rank and its call word
/// (dtype, reduction, root). Readers check the writer's before they touch a chunk, so ranks that
/// disagree fail with an error naming both calls instead of reading past what was staged or
/// reducing another type (the always-on mismatch check; docs/architecture.md, "Mismatches").
struct Expect {
  Kind kind;
  uint64_t bytes;
  uint32_t call = 0;
};

/// The rest of a call, packed: dtype, reduction (`reduce` < 0: none) and root (< 0: none; the
/// root of a group on one node fits 16 bits).
uint32_t call_word(DataType dt, int reduce, int root);

/// Stamps staging buffer `chunk` with `e`, then publishes it (written = chunk + 1). A rank may
/// stamp a chunk without staging data in it, so that peers can check what it called. `source`:
/// 0 when the chunk is staged, else direct_source(...) of where it lies unstaged, or
/// kInWriterMemory with its `address` in this process.
void publish_written(Segment& s, uint64_t chunk, const Expect& e, uint64_t source = 0,
                     const void* address = nullptr);

/// Stamp::source of a chunk that readers copy out of the writer's memory (single copy): no
/// symmetric buffer's (direct_source's offsets stay below kMaxWindowBytes - 1).
constexpr uint64_t kInWriterMemory = ~uint64_t(0);

/// Stamp::source of a chunk that readers copy out of the writer's memory, that chunk alone: the
/// writer is still writing the chunks after it (a broadcast's root relaying its own output).
constexpr uint64_t kChunkInWriterMemory = kInWriterMemory - 1;

/// Stamp::source of a chunk left at `offset` of this rank's symmetric buffer `window`
/// (window <= kMaxWindows, offset < kMaxWindowBytes: alloc_symmetric refuses more).
inline uint64_t direct_source(uint32_t window, size_t offset) {
  return uint64_t(window) << 40 | uint64_t(offset);
}

/// Where `rank` left `chunk` (its stamp's source: 0 staged, direct_source(...) or
/// kInWriterMemory); wait_written must have returned.
uint64_t stamp_source(Segment& s, int rank, uint64_t chunk);

/// True when `rank` left `chunk` unstaged (in a symmetric buffer or its memory).
inline bool unstaged(Segment& s, int rank, uint64_t chunk) {
  return stamp_source(s, rank, chunk) != 0;
}

/// True when `rank` left its whole input, from `chunk` on, in its own memory for its peers to
/// copy (single copy).
inline bool in_writer_memory(Segment& s, int rank, uint64_t chunk) {
  return stamp_source(s, rank, chunk) == kInWriterMemory;
}

/// Fails a copy between this rank and the memory of `rank` (process `pid`) that stopped with
/// `err` (read_process or write_process): a peer that is gone is a peer_failure its peers see for
/// themselves; any other error abandons the collective (transport).
[[noreturn]] void cross_process_failed(Segment& s, int rank, int32_t pid, size_t bytes, bool write,
                                       int err, const ErrorContext& where);

using CopyFn = void (*)(void* dst, const void* src, size_t bytes);

/// Where a reader's block from one peer goes: `bytes` at `dst`; a chunk covers `k` of them from
/// `off` on.
struct ReadInto {
  uint8_t* dst;
  size_t bytes, off, k;
};

/// Copies `rank`'s chunk `chunk` into `to` once wait_written returned: with `put` out of its
/// staging buffer (at `staged`) or, `skip` bytes on from where the chunk lies, out of its
/// symmetric buffer; or, single copy, the whole block at its first chunk with the kernel out of
/// the writer's memory (one system call, and no waits between chunks), nothing at the others
/// (kChunkInWriterMemory: that chunk alone, at each).
/// `held` keeps the window looked up, for the next chunk. A window this rank no longer holds, or
/// a peer whose memory cannot be read (it died), fails the collective on every rank, naming it.
void copy_written(Segment& s, int rank, uint64_t chunk, const uint8_t* staged, size_t skip,
                  const ReadInto& to, CopyFn put, std::shared_ptr<Window>& held,
                  const ErrorContext& where);

/// Waits until `rank` has staged `chunk`, then checks its stamp against `e`; on a mismatch marks
/// this rank as having given up and throws (invalid_argument, naming `rank` and both calls).
void wait_written(Segment& s, int rank, uint64_t chunk, const Expect& e, Clock::time_point deadline,
                  const ErrorContext& where);

/// True when `rank` has staged `chunk` and its stamp matches `e`: wait_written would return at
/// once, without an error. Never blocks, never throws.
bool written_ready(Segment& s, int rank, uint64_t chunk, const Expect& e);

/// Writes tiny collective `number` (from 1) with `e.bytes` (<= shm::kLineBytes) of `data` into
/// this rank's line and publishes it.
void publish_line(Segment& s, uint64_t number, const Expect& e, const void* data);

/// Waits until `rank` has published tiny collective `number`, checks it against `e`, and returns
/// its payload. A rank found in a staged collective instead, or in a tiny one of another size,
/// fails it as wait_written does.
const uint8_t* wait_line(Segment& s, int rank, uint64_t number, const Expect& e,
                         Clock::time_point deadline, const ErrorContext& where);

/// True when `rank` has published tiny collective `number` and it matches `e`: wait_line would
/// return at once, without an error. Never blocks, never throws.
bool line_ready(Segment& s, int rank, uint64_t number, const Expect& e);

/// Marks this rank as having given up on the collective (its peers' waits end at once, quoting
/// `what`) and throws invalid_argument with `what`, naming `rank` as the peer.
[[noreturn]] void give_up(Segment& s, int rank, const ErrorContext& where, const std::string& what);

/// Waits until every rank's counter reaches `value`.
inline void wait_all(Segment& s, Field f, uint64_t value, Clock::time_point deadline,
                     const ErrorContext& where) {
  for (int j = 0; j < s.size(); ++j) wait_for(s, j, f, value, deadline, where);
}

/// True when staging buffer `chunk` of every slot may be overwritten: every rank has consumed
/// the chunk `depth` earlier that used it. Never blocks.
bool buffer_free(Segment& s, uint64_t chunk);

/// Waits until staging buffer `chunk` of every slot may be overwritten.
inline void wait_buffer_free(Segment& s, uint64_t chunk, Clock::time_point deadline,
                             const ErrorContext& where) {
  if (chunk >= uint64_t(s.depth())) {
    wait_all(s, &SlotHeader::consumed, chunk + 1 - s.depth(), deadline, where);
  }
}

}  // namespace strata::shm
