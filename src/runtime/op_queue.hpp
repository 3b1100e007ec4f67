// The per-communicator op queue: operations drained in issue order by
// whichever thread gets there first, either the caller blocked in Work::wait() (inline, lowest
// latency) or the communicator's progress thread (so async work advances while the caller
// computes). One mutex serialises every use of the transport (a UCX worker).
//
// The progress thread is not woken by each submit: that would cost a context switch per call and,
// on a node with as many ranks as cores, preempt a peer in the middle of a collective. Instead a
// submit arms a one-shot timer; a caller that waits right away runs the operation inline long
// before it fires, and work nobody waits for starts after that delay: STRATA_PROGRESS_DELAY_US
// (default 50 us) for operations of 1 MiB and more, whose overlap with compute matters, and 2 ms
// for smaller ones, which are latency-bound and almost always waited on at once (a tight loop of
// small calls then sees one wake-up per 2 ms instead of one per call; a caller that drives
// leaves such a timer armed rather than pay two system calls to disarm and re-arm it). Idle, the
// thread sleeps in epoll, waking every 250 ms to look back (CallCheck::look_back: answer the
// peers' questions about past calls, look for their messages nobody took), a few microseconds
// each. A small all-reduce may bypass the queue altogether when the op queue is idle (try_claim;
// runtime/immediate.cpp). Operations that something else orders (NCCL calls, by their CUDA
// stream) are not queued but watched (watch()): polled by their waiters, and by the thread every
// 2 ms while any is outstanding.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/flight_recorder.hpp"
#include "runtime/work_state.hpp"
#include "strata/error.hpp"
#include "transport/peer_health.hpp"
#include "transport/transport.hpp"

namespace strata::runtime {

/// One queued operation. Collectives run to completion inside `run`; point-to-point operations
/// post their request in `run` and complete later, when the peer matches it.
struct Op {
  ErrorContext where;  // rank, group, op name, seq, peer
  bool is_collective = true;
  size_t bytes = 0;               // per rank; small operations are latency-bound
  DataType dtype = DataType::u8;  // what the flight recorder shows
  size_t count = 0;
  int reduce = -1;      // the ReduceOp of reductions, else -1
  uint64_t record = 0;  // its flight-recorder id
  std::function<void(transport::Transport&, Op&)> run;
  /// A collective's: true once every rank of the group has issued it, so that running it waits
  /// for no rank's caller (Work::test()). Empty where the group cannot tell (across nodes).
  std::function<bool()> issued_by_all;
  transport::Request request;  // point-to-point only
  Clock::time_point deadline{};
  std::shared_ptr<detail::WorkState> work;
};

class OpQueue : public std::enable_shared_from_this<OpQueue> {
 public:
  /// `health` watches the peers of this communicator (transport/peer_health.hpp); the op queue
  /// attaches its transport to it.
  OpQueue(std::unique_ptr<transport::Transport> transport,
          std::shared_ptr<transport::PeerHealth> health, std::chrono::milliseconds timeout);
  ~OpQueue();
  /// Starts the progress thread (separate from the constructor: it needs shared_from_this).
  void start();
  /// Queues `op` and returns its work state.
  std::shared_ptr<detail::WorkState> submit(Op op);
  /// Drives the queue from the calling thread until `target` finishes or `until` passes. With
  /// `issued_only`, stops before a collective some rank has not issued yet (Work::test()).
  void drive(detail::WorkState& target, Clock::time_point until, bool issued_only = false);
  /// The immediate path (runtime/immediate.cpp): an operation the caller completes itself, inside
  /// the call that issued it, with no Op, no queue and no allocation. try_claim() hands the
  /// caller the transport and the shared segment when no other thread holds them, nothing is queued
  /// (so issue order holds) and the group is healthy; otherwise it returns an unlocked lock and
  /// the operation is submitted as usual.
  std::unique_lock<std::mutex> try_claim();
  /// With the claim held: the operation completed at `at`; records it.
  void record_completed(const ErrorContext& where, DataType dtype, size_t count,
                        Clock::time_point at);
  /// With the claim held: the operation started at `started` but must wait for its peers. The
  /// rest of it, `op` (op.run, where, sizes), goes to the front of the queue with the deadline
  /// counted from `started`; whoever drives next finishes it. Returns its work state.
  std::shared_ptr<detail::WorkState> finish_later(Op op, Clock::time_point started);
  /// An operation that runs outside the queue, ordered by something else (a NCCL call, by its
  /// CUDA stream), and is finished by polling: `step` completes the state once the operation is
  /// done, or throws, failing it. Recorded as running from now. Whoever waits on or tests its
  /// Work polls it, and the progress thread every kWatchInterval while any is outstanding, so
  /// that callbacks fire and deadlines hold when nobody waits. The group's health is checked
  /// every few milliseconds meanwhile; `on_failure` runs once if the operation fails. Returns
  /// its work state.
  std::shared_ptr<detail::WorkState> watch(const ErrorContext& where, DataType dtype, size_t count,
                                           std::function<void(detail::WorkState&)> step,
                                           std::function<void()> on_failure = {});
  /// From any thread: throws the group's failure (a peer's death or abort) as an Error at
  /// `where`; reads the failure channel when no other thread holds the transport.
  void check_health(const ErrorContext& where);
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// Operations finished so far (done or failed, queued or immediate): Work::wait() reads
  /// whether the group progresses.
  uint64_t finished() const { return finished_.load(std::memory_order_relaxed); }
  const FlightRecorder& recorder() const { return recorder_; }
  /// Fails every queued and pending operation (ErrorCode::aborted), tells the peers, stops the
  /// progress thread; every later operation fails at once. Returns within about 100 ms even with
  /// a collective running (its waits see the abort at their next wake-up). Idempotent, any
  /// thread.
  void abort(const std::string& why = {});
  /// The group is going: stops the progress thread and fails what is queued or pending
  /// (ErrorCode::aborted). The queue itself may live on in a Work that polls it, on any thread
  /// but its own stopped one. Idempotent; the destructor calls it too.
  void close();

 private:
  // All of the following need exec_mu_.
  // Runs one queued op (with issued_only, not a collective some rank has not issued) or polls
  // p2p; true if anything moved.
  bool step_locked(bool issued_only = false);
  void run_locked(Op& op);
  void finish_locked(Op& op, std::exception_ptr e);
  bool poll_p2p_locked();
  void fail_all_locked(const std::function<Error(const ErrorContext&)>& why);
  void progress_loop();
  void arm_kick(size_t bytes);  // arms the timer that wakes the progress thread
  void disarm_kick();           // a caller drives: the thread may sleep on
  void kick_if_work_left();     // after drive(): what it left, the thread runs
  void sleep_until_kicked(int epoll_fd, int timeout_ms);  // the progress thread, unlocked
  // Polls the watched operations in issue order up to the first still running; returns the
  // progress thread's longest sleep: kWatchInterval while any is outstanding, else `idle_ms`.
  int poll_watched(int idle_ms);
  static constexpr auto kWatchInterval = std::chrono::milliseconds(2);
  static constexpr auto kHealthInterval = std::chrono::milliseconds(5);  // of a watched op's group
  static constexpr size_t kLargeOp = 1u << 20;  // from here the kick comes after progress_delay
  // disarm_kick() leaves a timer due later than this armed (a small op's, 2 ms after its submit).
  static constexpr std::chrono::nanoseconds kKeptKick = std::chrono::milliseconds(1);
  void sleep_locked(Clock::time_point until);  // sleeps on the network unless work is queued

  void stop_thread();
  std::shared_ptr<detail::WorkState> new_work(const ErrorContext& where);
  void enqueue(Op op, bool front);  // queues op (at the front: finish_later) and arms the kick

  std::unique_ptr<transport::Transport> transport_;
  std::shared_ptr<transport::PeerHealth> health_;
  Clock::time_point next_health_check_{};  // of pending p2p operations; guarded by exec_mu_
  // Idle, the progress thread wakes this often to look back (CallCheck::look_back).
  static constexpr auto kLookBackInterval = std::chrono::milliseconds(250);
  /// How long a failed operation waits for news of the failure's cause (PeerHealth::attribute).
  static constexpr auto kNewsGrace = std::chrono::milliseconds(500);
  Clock::time_point next_look_back_{};  // guarded by exec_mu_
  std::chrono::milliseconds timeout_;
  FlightRecorder recorder_;
  std::mutex exec_mu_;  // owner of the transport (taken untimed or by polling)
  std::mutex queue_mu_;
  std::deque<Op> queue_;
  std::list<Op> p2p_pending_;  // guarded by exec_mu_
  std::mutex watched_mu_;
  std::deque<std::shared_ptr<detail::WorkState>> watched_;  // watch()'s, oldest first
  std::string broken_;                  // first fatal error; guarded by exec_mu_
  bool reported_peer_failure_ = false;  // the flight record went out once; guarded by exec_mu_
  std::atomic<bool> stop_{false};
  std::atomic<bool> aborted_{false};  // abort() ran (or is running)
  std::atomic<uint64_t> finished_{0};
  std::atomic<int64_t> kick_due_{0};  // when the armed timer fires (steady ns); 0: not armed
  std::atomic<int> sleepers_{0};      // threads in sleep_locked(); submit wakes them
  std::atomic<int> blocked_{0};       // callers inside drive()
  int kick_fd_ = -1;                  // timerfd
  int stop_fd_ = -1;                  // eventfd
  int idle_epoll_ = -1;               // the progress thread's when idle: kick, stop
  int net_epoll_ = -1;                // ... with receives pending: kick, stop, network
  std::thread thread_;
};

}  // namespace strata::runtime
