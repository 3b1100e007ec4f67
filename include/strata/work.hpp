// Work: the handle every asynchronous Strata operation returns.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

namespace strata {

namespace detail {
struct WorkState;
}

/// Communicator::recv from whichever rank sends first.
inline constexpr int kAnySource = -1;

/// Completion handle of one operation. Copyable (copies share the operation). A default-constructed
/// Work is already complete. Waiting never blocks past its deadline.
class Work {
 public:
  Work() = default;
  explicit Work(std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}

  /// Waits for completion, at most `timeout`; throws strata::Error if the operation failed or the
  /// timeout passed (ErrorCode::timeout; the operation itself keeps running until its own deadline,
  /// its communicator's).
  void wait(std::chrono::milliseconds timeout) const;
  /// Waits as long as the communicator makes progress: it fails (ErrorCode::timeout) only when
  /// no operation of the communicator has completed for its deadline (STRATA_TIMEOUT, 300 s
  /// unless set) plus a grace of up to 5 s, so a wait behind a deep queue of healthy operations
  /// never times out. Such a failure aborts the communicator: nothing queued runs afterwards,
  /// so the caller may free its buffers once this throws.
  void wait() const;
  /// True when complete; throws strata::Error if the operation failed. Never waits for a rank
  /// that has not issued the collective yet: when no other thread is running the communicator's
  /// queue, it runs on this thread the queued operations up to the first collective some rank
  /// has not issued, and a collective so started runs to its end (as in wait()). A group across
  /// nodes cannot tell whether its peers have issued: there test() leaves collectives to the
  /// progress thread and to wait().
  bool test() const;
  /// Runs `callback` once when the operation completes, successfully or not (at once, on this
  /// thread, if it already has). It runs on the thread that completes the operation, often
  /// Strata's progress thread: it must be short and must not call into Strata, wait, or hold
  /// the last copy of a Communicator (the progress thread cannot end its own group): hand the
  /// news to a thread of your own. An operation runs every callback given it, in that order
  /// (two owners of one operation each get theirs).
  void on_complete(std::function<void()> callback) const;
  /// Seconds between the operation's start and its completion (0 until complete, and for an
  /// operation that completed inside the call that issued it: a tiny all-reduce on one node).
  double elapsed_seconds() const;
  /// The rank a completed recv received from (the match of a kAnySource receive); -1 for other
  /// operations and before completion.
  int source() const;

 private:
  std::shared_ptr<detail::WorkState> state_;
};

}  // namespace strata
