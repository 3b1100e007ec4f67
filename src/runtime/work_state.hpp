// Shared state behind a Work handle: completion, error and timing of one operation.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "strata/error.hpp"
#include "strata/types.hpp"

namespace strata::runtime {
class OpQueue;
}

namespace strata::detail {

// The status is an atomic so that a thread driving the op queue asks "finished?" without a lock
// (it asks several times per operation); the mutex and condition variable serve only a thread
// that sleeps on the operation while another one drives it.
struct WorkState {
  enum class Status { queued, running, done, failed };

  std::atomic<Status> status{Status::queued};
  std::exception_ptr error;               // set before status becomes failed
  Clock::time_point start{}, end{};       // set before status becomes done or failed
  int source = -1;                        // a recv's sender, set before status becomes done
  std::weak_ptr<runtime::OpQueue> queue;  // lets a waiting thread drive progress inline
  std::chrono::milliseconds default_timeout{300000};
  ErrorContext where;  // the operation's rank, group, name and seq, for Work::wait's own errors
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<int> sleepers{0};                    // threads in sleep_until()
  std::vector<std::function<void()>> on_complete;  // guarded by mu; each run once
  std::atomic<bool> has_callback{false};
  /// Set for an operation no op queue drives (a device send or receive: runtime/device_path.cpp):
  /// a waiting thread calls it until it returns true, having completed the state.
  std::function<bool()> poll;

  bool finished() const {
    const Status s = status.load(std::memory_order_acquire);
    return s == Status::done || s == Status::failed;
  }
  void mark_running(Clock::time_point now) {
    start = now;
    status.store(Status::running, std::memory_order_relaxed);
  }
  void complete(std::exception_ptr e, Clock::time_point now) {
    if (start == Clock::time_point{}) start = now;
    end = now;
    error = e;
    status.store(e ? Status::failed : Status::done, std::memory_order_seq_cst);
    // A sleeper announced itself before its last look at the status, so one of us sees the other.
    if (sleepers.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> l(mu);
      cv.notify_all();
    }
    if (has_callback.load(std::memory_order_seq_cst)) run_callback();
  }
  /// Adds `f` to run once when finished (now, if already), after those added before it. Like
  /// the sleepers, the flag and the status are each written before the other is read, so one
  /// side sees the other; whoever takes the list under the lock runs it.
  void add_callback(std::function<void()> f) {
    {
      std::lock_guard<std::mutex> l(mu);
      on_complete.push_back(std::move(f));
    }
    has_callback.store(true, std::memory_order_seq_cst);
    if (finished()) run_callback();
  }
  void run_callback() {
    std::vector<std::function<void()>> fs;
    {
      std::lock_guard<std::mutex> l(mu);
      fs.swap(on_complete);
    }
    for (auto& f : fs) f();
  }
  /// Sleeps until finished() or `until`.
  void sleep_until(Clock::time_point until) {
    std::unique_lock<std::mutex> l(mu);
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    cv.wait_until(l, until, [&] { return finished(); });
    sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
};

}  // namespace strata::detail
