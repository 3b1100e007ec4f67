// The write mode of staging copies: which CPU stores stage a large chunk in shared memory,
// ordinary or streaming, or no staging at all (single copy), learned at run time per rank.
//
// A staged chunk is written by one core and read by the others. Ordinary stores leave its lines
// dirty in the writer's cache, and readers fetch them from there: fast when the cores share a
// cache or sit close, slow when they do not (on the VMs measured, a staged copy ran at 23 GB/s
// with the two vCPUs ~140 ns apart and 6-8.5 GB/s with them ~600 ns apart, and the host moves
// them from minute to minute). Streaming stores send the lines to memory, where readers fetch
// them at DRAM speed either way: 2-3x faster far apart, 1.3-2x slower close together
// (benchmarks/RESULTS.md, "vCPU placement"). No fixed choice wins, so every rank times its
// operations of 64 KiB and more in the mode it uses, tries the others now and then, and keeps the
// fastest.
//
// Single copy: the collectives that only move data (all-gather, all-to-all(v)) may leave the
// input unstaged and let every reader copy its part straight out of this process's memory
// (process_vm_readv, as Open MPI's vader does; Segment::single_copy_possible). One cross-core
// transfer per byte instead of two, but the kernel copies at its own speed and pins pages: on the
// AMD EPYC VM it lost to staging, on the Intel Xeon VM staging lost (RESULTS.md), so it is one
// more mode to time, offered only where the peers can read this process.
//
// The choice is the writer's alone (readers load the same bytes either way), so ranks that
// disagree for a while still compute correct results. But a rank's time depends on every
// writer's mode, so ranks that each follow their own noisy timings end up mixing modes and timing
// the mixture (n = 4 on 2 cores, all-to-all: two ranks kept ordinary stores, two single copy,
// each op 250-870 us in either, where the group in single copy took 1.2-2x less than in any other
// mode). So a group learns as one (GroupChoice): rank 0 publishes the mode it prefers, the others
// follow it, and all run the same schedule of trials, so every operation, a trial or not, runs
// and is timed in one mode on every rank.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "base/config.hpp"
#include "shm/segment.hpp"

namespace strata::shm {

/// single_copy: not staged; the readers copy the input out of the writer's memory.
enum class WriteMode : uint8_t { ordinary, streaming, single_copy };

/// Where a group's ranks make a learned choice alike: the leader publishes the mode it prefers
/// in `led` (0 none yet, else 1 + the mode), the others follow it. No `led`: this rank alone.
struct GroupChoice {
  std::atomic<uint8_t>* led = nullptr;
  bool leads = true;
};

/// The learned choice for one kind of operation on one group, as seen by one rank.
class WriteModeChoice {
 public:
  /// Every kTryEvery operations, two run in a mode not currently preferred (the others in turn),
  /// to notice when one has become faster (the host moved the cores). 1/16 of the operations in
  /// a slower mode costs a few percent; a placement change is noticed within 32-64 operations.
  static constexpr uint64_t kTryEvery = 32;

  /// The mode for the next operation; single_copy only when `single_copy` offers it (it is
  /// measured the first time it is offered, from operation 4 on). A follower in `group` takes
  /// the leader's preferred mode for its own where the leader has published one.
  WriteMode next(bool single_copy = false, GroupChoice group = {});
  /// The time the operation begun by the last next() took, per byte of its payload; the leader
  /// of `group` publishes the mode it now prefers.
  void record(double seconds_per_byte, GroupChoice group = {});
  /// The fastest measured mode among those offered (ordinary until it has been measured).
  WriteMode preferred(bool single_copy = false) const;

 private:
  /// A mode's estimate is the fastest of its last kWindow timed operations, so that one
  /// operation the host slowed does not flip the choice (a running mean did: at 1 MiB, n = 2,
  /// over a third of the operations then ran in modes 2x slower); a mode that has turned slow
  /// is left after kWindow operations in it.
  static constexpr int kWindow = 3;
  struct Samples {
    double recent[kWindow] = {};  // seconds per byte; 0: none yet
    int next = 0;
  };
  /// Seconds per byte of `m`: the fastest of its recent samples; 0 while it has none.
  double cost(WriteMode m) const;

  uint64_t ops_ = 0;
  WriteMode running_ = WriteMode::ordinary;
  bool offered_ = false;  // single copy, at the last next()
  bool timed_ = false;    // the last next()'s operation is recorded
  Samples samples_[3];
};

/// One collective's choices by payload size, learned apart because the cost per byte differs
/// with size (synchronisation weighs more on small operations): 64-256 KiB, 256 KiB-1 MiB,
/// 1-4 MiB, 4-16 MiB, 16 MiB and up. Far apart, streaming stores won from 64 KiB up (2x at
/// 64 KiB, all-gather and all-to-all, n = 2).
class SizedWriteModeChoice {
 public:
  static constexpr size_t kLearnFromBytes = 64 * 1024;
  /// With more ranks than cores, operations below this are dominated by context switches, whose
  /// noise swamps the difference between the modes (n = 4 on 2 cores, 64 KiB: learning lost
  /// up to 60 % to ordinary stores), so they are not learned. From 256 KiB the group, learning
  /// as one, finds single copy there (all-to-all 1 MiB: 261-335 us against 406-448 unlearned).
  static constexpr size_t kLearnFromBytesOversubscribed = 256 * 1024;
  static constexpr int kSizeClasses = 5;
  /// `first_led`: the group's published choice (SlotHeader::led_modes) of the first class.
  explicit SizedWriteModeChoice(int first_led = 0) : first_led_(first_led) {}
  /// The choice for operations of `bytes`; null below the floor above, where operations are
  /// staged with ordinary stores (below 64 KiB they are too short for the timing not to weigh).
  WriteModeChoice* at(size_t bytes, bool oversubscribed);
  /// The index in SlotHeader::led_modes of at(bytes)'s published choice.
  int led_index(size_t bytes) const { return first_led_ + size_class(bytes); }

 private:
  static int size_class(size_t bytes);
  int first_led_;
  WriteModeChoice by_size_[kSizeClasses];
};

/// One rank's choices on one group, per collective that stages chunks.
struct StagingWriteModes {
  using C = SizedWriteModeChoice;
  C all_reduce{0}, all_gather{C::kSizeClasses}, all_to_all{2 * C::kSizeClasses},
      all_to_allv{3 * C::kSizeClasses};
};
static_assert(4 * SizedWriteModeChoice::kSizeClasses <= kLedModes);

/// The staging copy of one operation of `bytes` payload: the mode `choices` picks for that size,
/// timed for it from construction to done(), or the mode `policy` forces (neither learned nor
/// timed); with no `choices`, ordinary stores unless `policy` forces another mode. `group`: the
/// segment whose ranks choose alike (rank 0 leads; whether it is oversubscribed sets where
/// learning starts), or none (a rank alone, as in unit tests). `single_copy`: the operation may
/// leave its input unstaged (mode() single_copy, where the copy does nothing); a policy of
/// single_copy where it may not stages with ordinary stores. An operation that throws is not
/// recorded.
class StagingCopy {
 public:
  StagingCopy(SizedWriteModeChoice* choices, size_t bytes, Segment* group, bool single_copy = false,
              ShmWriteMode policy = config().shm_write_mode);
  void operator()(void* dst, const void* src, size_t n) const;
  WriteMode mode() const { return mode_; }
  void done();

 private:
  WriteModeChoice* choice_ = nullptr;  // null: not timed
  GroupChoice group_;
  size_t bytes_;
  WriteMode mode_ = WriteMode::ordinary;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace strata::shm
