// The intra-node fast path's memory: one POSIX shared-memory segment per communicator whose ranks
// all share a node, mapped by every rank. Each rank owns a slot of staging buffers and three
// monotonic progress counters that the others read; the algorithms in shm/*.cpp load
// and store it directly, the way NCCL reads peers over NVLink.
//
// The segment is an anonymous memory file (memfd) that the other ranks open through rank 0's
// /proc entry: it has no name, so nothing is ever left in /dev/shm, whatever happens to the job.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "shm/window.hpp"
#include "strata/error.hpp"
#include "strata/store.hpp"
#include "transport/watchdog.hpp"

namespace strata::shm {

/// Counters a rank publishes; each on its own cache line so writers do not contend. `waiters`
/// counts ranks asleep on the counter (a futex on the low half of `value`), so a publisher makes
/// the wake-up system call only when someone sleeps.
struct alignas(64) Counter {
  std::atomic<uint64_t> value{0};
  std::atomic<uint32_t> waiters{0};
};

/// Most bytes a tiny all-reduce carries in its cache line (shm/all_reduce.cpp).
constexpr size_t kLineBytes = 48;

/// A whole tiny collective in one cache line: a peer waits for `seq`, checks what it is (`what`:
/// kind, size, dtype and reduction, packed by sync.cpp), and reads the payload, all from the one
/// line this rank wrote. Two per rank, used in turn: a rank
/// starts tiny collective L + 2 only after every peer published L + 1, which each does only once
/// it has read every line of L.
struct alignas(64) Line {
  std::atomic<uint64_t> seq{0};      ///< number (from 1) of the tiny collective it holds
  std::atomic<uint32_t> waiters{0};  ///< ranks asleep on `seq` (a futex on its low half)
  std::atomic<uint32_t> what{0};
  uint8_t payload[kLineBytes];
};
static_assert(sizeof(Line) == 64);

/// Most staging buffers per rank (STRATA_SHM_DEPTH is clamped to it).
constexpr int kMaxDepth = 64;
/// Most learned choices a group shares (SlotHeader::led_modes).
constexpr int kLedModes = 32;

/// What the chunk in one staging buffer belongs to, written before `written` is published.
struct Stamp {
  std::atomic<uint64_t> chunk{0};  ///< the chunk's sequence number
  std::atomic<uint64_t> bytes{0};  ///< the collective's bytes per rank
  std::atomic<uint32_t> kind{0};   ///< which collective (Kind, sync.hpp)
  std::atomic<uint32_t> call{0};   ///< its dtype, reduction and root (call_word, sync.hpp)
  /// 0: the chunk is in the buffer; else it lies in the writer's symmetric buffer, unstaged
  /// (window.hpp; packed by direct_source, sync.hpp), or, kInWriterMemory, at `address`.
  std::atomic<uint64_t> source{0};
  std::atomic<uint64_t> address{0};  ///< single copy: the chunk's address in the writer's memory
};

struct SlotHeader {
  Counter written;          ///< chunks this rank has staged in its slot
  Counter reduced;          ///< chunks whose reduced sub-block this rank has published
  Counter consumed;         ///< chunks this rank has finished reading from every slot
  Stamp stamps[kMaxDepth];  ///< one per staging buffer
  /// Collectives this rank has issued on the group, staged or not: Work::test() starts one only
  /// once every rank has (sync.hpp, all_issued).
  Counter issued;
  /// Set when this rank abandoned a collective (its peers' waits fail at once instead of at
  /// their deadline, quoting `why`); the group is unusable afterwards.
  std::atomic<uint32_t> gave_up{0};
  char why[448];  ///< written before gave_up is set: the mismatch, with both calls
  Line lines[2];  ///< tiny collectives, alternately
  /// Single copy (Segment::single_copy_possible): this rank's process id, the address of that
  /// field in its own mapping (peers read it and write it back to learn whether they may), and
  /// whether this rank may read and write every peer's memory (0 until it has tried, then 1 yes
  /// or 2 no).
  std::atomic<int32_t> pid{0};
  std::atomic<uint32_t> copies_peers{0};
  std::atomic<uint64_t> pid_address{0};
  /// Rank 0's: the write mode it prefers for each learned choice, which the others follow
  /// (write_mode.hpp, GroupChoice): 0 while it has none, else 1 + the mode.
  std::atomic<uint8_t> led_modes[kLedModes] = {};
};

class Segment {
 public:
  /// Collective over the `size` ranks meeting in `store`: rank 0 creates, the others map.
  Segment(Store& store, int rank, int size, size_t chunk_bytes, int depth, bool oversubscribed,
          const ErrorContext& where, std::chrono::milliseconds timeout);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// Bytes of one staging buffer, and how many a slot has (the pipeline depth).
  size_t chunk_bytes() const { return chunk_bytes_; }
  int depth() const { return depth_; }
  /// More ranks in this group than cores this process may run on: waiting must not spin.
  bool oversubscribed() const { return oversubscribed_; }
  /// The last-level cache this rank's core shares, bytes (sysfs; 8 MiB when it does not say).
  size_t cache_bytes() const { return cache_bytes_; }
  SlotHeader& header(int rank) {  // inline: every wait polls through it
    return *reinterpret_cast<SlotHeader*>(base_ + slot_bytes_ * size_t(rank));
  }
  /// Staging buffer `index` (taken modulo depth) of `rank`'s slot.
  uint8_t* buffer(int rank, uint64_t index);

  /// The group's symmetric buffers (window.hpp).
  Windows& windows() { return windows_; }

  /// Whether this rank may leave an input unstaged for its peers to copy out of its memory:
  /// every rank, itself included, has read each peer's process id out of that peer's memory and
  /// written it back (process_vm_readv and process_vm_writev; the kernel refuses them under
  /// Yama's ptrace_scope 1, a seccomp filter may forbid either). False until every peer has tried,
  /// which each does at its first call here after all have mapped the segment; then settled for
  /// good.
  bool single_copy_possible();

  /// Consulted by waits that sleep (transport/watchdog.hpp); not owned, may be null.
  void set_watchdog(transport::Watchdog* w) { watchdog_ = w; }
  transport::Watchdog* watchdog() const { return watchdog_; }

  /// Chunks processed so far by this rank; every rank processes the same sequence, so this is
  /// also the value the counters of chunk `next_chunk` will reach.
  uint64_t next_chunk = 0;
  /// Tiny collectives (one cache line each) so far by this rank, counted apart from chunks.
  uint64_t next_line = 0;
  /// What this rank has read unstaged (tests look): chunks from peers' symmetric buffers, and
  /// blocks copied out of their memory (single copy).
  uint64_t direct_reads = 0, process_reads = 0;
  /// Blocks, or parts of them, this rank wrote into its peers' memory (balanced single copy).
  uint64_t process_writes = 0;

 private:
  int rank_, size_;
  size_t chunk_bytes_;
  int depth_;
  bool oversubscribed_;
  size_t cache_bytes_;
  size_t slot_bytes_;
  size_t total_bytes_;
  uint8_t* base_ = nullptr;
  transport::Watchdog* watchdog_ = nullptr;
  Windows windows_;
  enum class Settled : uint8_t { no, yes, unknown } single_copy_ = Settled::unknown;
};

/// Copies `bytes` at `from` in process `pid` into `to` (process_vm_readv, continued over its
/// short reads): 0, or the errno that stopped it (EFAULT when it copied nothing).
int read_process(int32_t pid, void* to, const void* from, size_t bytes);
/// Copies `bytes` at `from` into `to` in process `pid` (process_vm_writev), as read_process.
int write_process(int32_t pid, void* to, const void* from, size_t bytes);

}  // namespace strata::shm
