// The op queue's progress thread and the one-shot timer ("kick") that wakes it: the policy in
// op_queue.hpp's header comment. Split from op_queue.cpp, which runs the operations.
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "base/config.hpp"
#include "base/spin_policy.hpp"
#include "runtime/op_queue.hpp"

namespace strata::runtime {

void OpQueue::start() {
  thread_ = std::thread([this] { progress_loop(); });
}

void OpQueue::stop_thread() {
  stop_ = true;
  uint64_t one = 1;
  ssize_t ignored = ::write(stop_fd_, &one, sizeof one);
  (void)ignored;
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void OpQueue::arm_kick(size_t bytes) {
  // A small op never needs an armed timer to fire sooner: skip the clock read and the syscall.
  if (bytes < kLargeOp && kick_due_.load(std::memory_order_relaxed) != 0) return;
  const auto delay = bytes >= kLargeOp ? std::chrono::nanoseconds(config().progress_delay)
                                       : std::chrono::nanoseconds(std::chrono::milliseconds(2));
  const int64_t due = (Clock::now() + delay).time_since_epoch().count();
  int64_t cur = kick_due_.load();
  // Re-arm only when nothing is armed or this op needs it sooner: usually no system call at all.
  while (cur == 0 || due < cur) {
    if (kick_due_.compare_exchange_weak(cur, due)) {
      itimerspec t{};
      t.it_value.tv_sec = delay.count() / 1000000000;
      t.it_value.tv_nsec = std::max<long>(1, delay.count() % 1000000000);
      ::timerfd_settime(kick_fd_, 0, &t, nullptr);
      return;
    }
  }
}

void OpQueue::disarm_kick() {
  // A small op's timer, due in milliseconds, stays: it wakes the thread once (which finds the
  // caller driving, or nothing to do, and sleeps on), where disarming and re-arming it cost two
  // timerfd_settime calls per operation (one rank's empty queued op, submitted and waited in a
  // loop on this VM: 4.1 us a call, 0.5 without them).
  const int64_t due = kick_due_.load(std::memory_order_relaxed);
  if (due == 0 || due - Clock::now().time_since_epoch().count() > kKeptKick.count()) return;
  if (kick_due_.exchange(0) == 0) return;
  itimerspec off{};
  ::timerfd_settime(kick_fd_, 0, &off, nullptr);
}

void OpQueue::kick_if_work_left() {
  bool left;
  {
    std::lock_guard<std::mutex> q(queue_mu_);
    left = !queue_.empty() || !p2p_pending_.empty();
  }
  if (left) arm_kick(kLargeOp);
}

void OpQueue::progress_loop() {
  set_blocked_callers(&blocked_);
  const int idle_ms = int(std::chrono::milliseconds(kLookBackInterval).count());
  auto take_worker_by = Clock::now();  // at least once a look-back interval, as before
  while (!stop_) {
    const auto now = Clock::now();
    if (blocked_.load() > 0 && now < take_worker_by) {
      // A caller drives the queue: it runs what is queued and polls the network meanwhile.
      // Contending for the worker would only cost a context switch each way (torch all_reduce of
      // 1 MiB, 2 ranks on 2 cores: 3.9 -> 0.04 switches and 162 -> 126 us a call, with
      // disarm_kick); the caller kicks this thread when it leaves work behind.
      kick_due_ = 0;
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(take_worker_by - now);
      sleep_until_kicked(idle_epoll_, poll_watched(int(left.count())));
      continue;
    }
    take_worker_by = now + kLookBackInterval;
    bool wait_on_network = false;
    {
      std::lock_guard<std::mutex> ex(exec_mu_);
      kick_due_ = 0;  // from here on, a new submit must arm the timer again
      // The network is only polled for pending receives/sends; collectives poll it themselves.
      while (step_locked() || (!p2p_pending_.empty() && transport_->progress())) {
      }
      // Nothing runs: answer the peers' questions about past calls, look for their messages
      // that nobody took (transport/calls/call_history.hpp), and fail the group on a mismatch. A
      // failed group only answers (a peer may be asking what this rank called).
      if (Clock::now() >= next_look_back_) {
        next_look_back_ = Clock::now() + kLookBackInterval;
        if (!broken_.empty() || health_->failed()) {
          transport_->progress();
        } else if (transport_->calls() && transport_->calls()->look_back()) {
          health_->await_news(Clock::now());
        }
      }
      if (!p2p_pending_.empty()) {
        if (!transport_->arm()) continue;  // events arrived meanwhile: progress again
        wait_on_network = true;
      }
    }
    // Sleep without holding the worker, so a waiting caller can take over. With receives
    // pending, wake at least every 100 ms to check their deadlines; with watched operations
    // outstanding, every kWatchInterval (they are polled without the worker: their health
    // checks take it).
    sleep_until_kicked(wait_on_network ? net_epoll_ : idle_epoll_,
                       poll_watched(wait_on_network ? 100 : idle_ms));
  }
}

void OpQueue::sleep_until_kicked(int epoll_fd, int timeout_ms) {
  epoll_event ev[3];
  const int n = ::epoll_wait(epoll_fd, ev, 3, timeout_ms);
  for (int i = 0; i < n; ++i) {
    if (ev[i].data.fd == kick_fd_) {
      uint64_t v;
      ssize_t ignored = ::read(kick_fd_, &v, sizeof v);
      (void)ignored;
    }
  }
}
}  // namespace strata::runtime
