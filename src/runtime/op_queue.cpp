#include "runtime/op_queue.hpp"

#include <immintrin.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <optional>
#include <thread>

#include "base/config.hpp"
#include "base/log.hpp"
#include "base/spin_policy.hpp"
#include "transport/ucx/factory.hpp"  // quiet_after_failure

namespace strata::runtime {
namespace {

// Takes `l`'s mutex by polling, until `limit` or until `give_up()`. A timed lock would sleep on
// the futex instead, but ThreadSanitizer does not model timed locks (docs/architecture.md,
// "Sanitizers"), and on these VMs a futex wake-up costs about what a short sleep does
// (spin_policy.hpp).
template <typename GiveUp>
bool lock_before(std::unique_lock<std::mutex>& l, Clock::time_point limit, GiveUp give_up) {
  while (!l.try_lock()) {
    if (Clock::now() >= limit || give_up()) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

}  // namespace

OpQueue::OpQueue(std::unique_ptr<transport::Transport> transport,
                 std::shared_ptr<transport::PeerHealth> health, std::chrono::milliseconds timeout)
    : transport_(std::move(transport)),
      health_(std::move(health)),
      timeout_(timeout),
      recorder_(config().flight_records) {
  health_->attach(transport_.get());
  transport_->set_watchdog(health_.get());
  register_recorder(&recorder_);
  kick_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  stop_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  // The worker's event fd stays readable until the worker is progressed, so it must only be
  // watched while the thread actually waits on the network (else epoll returns at once, forever).
  idle_epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  net_epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  auto watch = [](int ep, int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  };
  for (int fd : {kick_fd_, stop_fd_}) {
    watch(idle_epoll_, fd);
    watch(net_epoll_, fd);
  }
  watch(net_epoll_, transport_->event_fd());
}

void OpQueue::abort(const std::string& why) {
  health_->abort(why);
  if (aborted_.exchange(true)) return;  // one abort does the work (two would join one thread)
  transport_->wake();
  // A running collective sees the abort at its next wake-up (<= 100 ms) and lets go.
  std::unique_lock<std::mutex> ex(exec_mu_, std::defer_lock);
  if (!lock_before(ex, Clock::now() + std::chrono::seconds(5), [] { return false; })) {
    STRATA_LOG(WARN, "COLL") << "abort: the running operation did not let go within 5 s";
    return;
  }
  // What made the caller abort, if anything: `why`, or the failure that broke the group.
  const std::string after = why.empty() ? broken_ : why;
  broken_ = "aborted";
  ucx::quiet_after_failure();
  fail_all_locked([&](const ErrorContext& w) { return health_->failure(w); });
  health_->announce_abort(after);
  if (!reported_peer_failure_) recorder_.report("abort");  // nothing was pending
  reported_peer_failure_ = true;
  ex.unlock();
  stop_thread();
}

void OpQueue::close() {
  stop_thread();
  std::lock_guard<std::mutex> ex(exec_mu_);
  health_->attach(nullptr);
  reported_peer_failure_ = true;  // what a destroyed communicator drops is not a peer's failure
  fail_all_locked([](const ErrorContext& w) {
    return Error(ErrorCode::aborted, w, "communicator destroyed with the operation still pending");
  });
}

OpQueue::~OpQueue() {
  unregister_recorder(&recorder_);
  close();
  for (int fd : {kick_fd_, stop_fd_, idle_epoll_, net_epoll_}) ::close(fd);
}

void OpQueue::sleep_locked(Clock::time_point until) {
  // Announce the sleep before the last look at the queue; submit() checks sleepers_ after
  // queueing, so one of the two always sees the other.
  sleepers_.fetch_add(1);
  bool queued;
  {
    std::lock_guard<std::mutex> q(queue_mu_);
    queued = !queue_.empty();
  }
  if (!queued) transport_->sleep(until);
  sleepers_.fetch_sub(1);
}

std::shared_ptr<detail::WorkState> OpQueue::new_work(const ErrorContext& where) {
  auto work = std::make_shared<detail::WorkState>();
  work->where = where;
  work->queue = weak_from_this();
  work->default_timeout = timeout_;
  return work;
}

void OpQueue::enqueue(Op op, bool front) {
  const size_t bytes = op.bytes;
  {
    std::lock_guard<std::mutex> q(queue_mu_);
    if (front)
      queue_.push_front(std::move(op));
    else
      queue_.push_back(std::move(op));
  }
  if (sleepers_.load() > 0) transport_->wake();  // a thread asleep on the network must see it
  arm_kick(bytes);
}

std::shared_ptr<detail::WorkState> OpQueue::submit(Op op) {
  auto work = new_work(op.where);
  op.work = work;
  op.record = recorder_.queued(op.where, op.is_collective, op.dtype, op.count);
  enqueue(std::move(op), false);
  return work;
}

std::unique_lock<std::mutex> OpQueue::try_claim() {
  std::unique_lock<std::mutex> ex(exec_mu_, std::try_to_lock);
  if (!ex.owns_lock()) return ex;
  bool idle;
  {
    std::lock_guard<std::mutex> q(queue_mu_);
    idle = queue_.empty();
  }
  // After a failure every operation must fail the queued way, with its error and record.
  if (!idle || !broken_.empty() || health_->failed()) ex.unlock();
  return ex;
}

void OpQueue::record_completed(const ErrorContext& where, DataType dtype, size_t count,
                               Clock::time_point at) {
  recorder_.completed(where, dtype, count, at);
  finished_.fetch_add(1, std::memory_order_relaxed);
}

std::shared_ptr<detail::WorkState> OpQueue::finish_later(Op op, Clock::time_point started) {
  auto work = new_work(op.where);
  work->mark_running(started);
  op.work = work;
  op.record = recorder_.running(op.where, op.is_collective, op.dtype, op.count, started);
  op.deadline = started + timeout_;
  enqueue(std::move(op), true);
  return work;
}

// Completes op's work (failed when e is set) and its flight record. A timeout, and the first
// failure caused by a dead or aborting peer, also report the record: it is what a person needs to
// see which rank stopped where.
void OpQueue::finish_locked(Op& op, std::exception_ptr e) {
  std::string what;
  const char* report = nullptr;
  if (e) try {
      std::rethrow_exception(e);
    } catch (const Error& err) {
      what = err.what();
      if (err.code() == ErrorCode::timeout) report = "timeout";
      const bool peer = err.code() == ErrorCode::peer_failure || err.code() == ErrorCode::aborted;
      if (peer && !reported_peer_failure_) {
        reported_peer_failure_ = true;
        report = err.code() == ErrorCode::aborted ? "abort" : "peer failure";
      }
    } catch (const std::exception& err) {
      what = err.what();
    }
  const auto now = Clock::now();  // one clock read for the record and the work
  recorder_.ended(op.record, what, now);
  if (op.request.is_recv) op.work->source = op.request.peer;  // known once matched
  op.work->complete(e, now);
  finished_.fetch_add(1, std::memory_order_relaxed);
  if (report) {
    recorder_.report(std::string(report) + " in " + op.where.op + " seq " +
                     std::to_string(op.where.seq));
  }
}

void OpQueue::run_locked(Op& op) {
  if (health_->failed()) {  // a peer died or the group was aborted: nothing can complete
    broken_ = "peer failure";
    finish_locked(op, std::make_exception_ptr(health_->failure(op.where)));
    return;
  }
  if (!broken_.empty() && op.is_collective) {
    finish_locked(op, std::make_exception_ptr(
                          Error(ErrorCode::aborted, op.where,
                                "communicator is unusable after an earlier failure: " + broken_)));
    return;
  }
  if (op.work->status.load(std::memory_order_relaxed) == detail::WorkState::Status::queued) {
    const auto now = Clock::now();  // (an op from finish_later() started already)
    op.work->mark_running(now);
    recorder_.started(op.record, now);
    op.deadline = now + timeout_;
  }
  try {
    op.run(*transport_, op);
    if (op.is_collective || transport_->test(op.request, op.where)) {
      finish_locked(op, nullptr);
    } else {
      std::lock_guard<std::mutex> q(queue_mu_);
      p2p_pending_.push_back(std::move(op));
    }
  } catch (const Error& raw) {
    // A transport error is often the echo of another rank's failure: name the cause when news
    // of it comes within kNewsGrace (a dead process of this machine shows after kExitGrace).
    const Error e = health_->attribute(raw, std::min(op.deadline, Clock::now() + kNewsGrace));
    if (op.is_collective) broken_ = e.what();
    if (op.is_collective) ucx::quiet_after_failure();  // reported below, once
    STRATA_LOG(WARN, "COLL") << e.what();
    finish_locked(op, std::make_exception_ptr(e));
  } catch (const std::exception& e) {
    if (op.is_collective) broken_ = e.what();
    finish_locked(op, std::make_exception_ptr(Error(ErrorCode::internal, op.where, e.what())));
  }
}

bool OpQueue::poll_p2p_locked() {
  bool moved = false;
  std::lock_guard<std::mutex> q(queue_mu_);
  // Receives wait for a peer that may have died: ask at most every few milliseconds.
  if (!p2p_pending_.empty() && Clock::now() >= next_health_check_) {
    next_health_check_ = Clock::now() + std::chrono::milliseconds(5);
    try {
      health_->check(p2p_pending_.front().where);
    } catch (const Error&) {
      for (auto& op : p2p_pending_) {
        transport_->cancel(op.request);
        finish_locked(op, std::make_exception_ptr(health_->failure(op.where)));
      }
      p2p_pending_.clear();
      return true;
    }
  }
  for (auto it = p2p_pending_.begin(); it != p2p_pending_.end();) {
    Op& op = *it;
    try {
      if (!transport_->test(op.request, op.where)) {
        if (Clock::now() < op.deadline) {
          ++it;
          continue;
        }
        transport_->cancel(op.request);
        throw Error(ErrorCode::timeout, op.where,
                    "timed out waiting for " +
                        (op.where.peer < 0 ? std::string("any peer")
                                           : "peer " + std::to_string(op.where.peer)) +
                        " to match it (STRATA_TIMEOUT; is that rank alive and posting the "
                        "matching " +
                        (op.where.op == "send" ? "recv" : "send") + "?)");
      }
      finish_locked(op, nullptr);
    } catch (const Error& e) {
      STRATA_LOG(WARN, "NET") << e.what();
      finish_locked(op, std::current_exception());
    }
    it = p2p_pending_.erase(it);
    moved = true;
  }
  return moved;
}

bool OpQueue::step_locked(bool issued_only) {
  std::optional<Op> op;
  {
    std::lock_guard<std::mutex> q(queue_mu_);
    const bool waits = !queue_.empty() && issued_only && queue_.front().is_collective &&
                       !(queue_.front().issued_by_all && queue_.front().issued_by_all());
    if (!queue_.empty() && !waits) {
      op.emplace(std::move(queue_.front()));
      queue_.pop_front();
    }
  }
  if (!op) return poll_p2p_locked();
  run_locked(*op);
  return true;
}

void OpQueue::fail_all_locked(const std::function<Error(const ErrorContext&)>& why) {
  std::deque<Op> queued;
  std::list<Op> pending;
  {
    std::lock_guard<std::mutex> q(queue_mu_);
    queued.swap(queue_);
    pending.swap(p2p_pending_);
  }
  for (auto& op : pending) {
    transport_->cancel(op.request);
    finish_locked(op, std::make_exception_ptr(why(op.where)));
  }
  for (auto& op : queued) finish_locked(op, std::make_exception_ptr(why(op.where)));
}

void OpQueue::drive(detail::WorkState& target, Clock::time_point until, bool issued_only) {
  const auto spin = spin_budget(transport_->oversubscribed());
  set_inline_caller(true);
  blocked_.fetch_add(1);
  // This caller runs the queue now: no need to wake the progress thread. A test() may leave
  // work for it, so keeps the timer (two system calls saved when it does).
  if (!issued_only) disarm_kick();
  struct Reset {
    OpQueue& q;
    bool issued_only;
    ~Reset() {
      set_inline_caller(false);
      q.blocked_.fetch_sub(1);
      // (The thread clears the timer when it finds a caller driving.)
      if (!issued_only || q.kick_due_.load() == 0) q.kick_if_work_left();
    }
  } reset{*this, issued_only};
  for (;;) {
    if (target.finished()) return;
    // Another thread may be executing; take over as soon as it lets go (it may have finished our
    // operation by then). Poll first: sleeping on the mutex costs a wake-up (spin_policy.hpp).
    std::unique_lock<std::mutex> ex(exec_mu_, std::defer_lock);
    if (!ex.try_lock()) {
      const auto poll_until = Clock::now() + spin;
      while (!ex.try_lock() && Clock::now() < poll_until && !target.finished()) _mm_pause();
    }
    if (target.finished()) return;
    if (ex.owns_lock() ||
        lock_before(ex, std::min(until, Clock::now() + std::chrono::milliseconds(10)),
                    [&] { return target.finished(); })) {
      auto spin_until = Clock::now() + spin;
      while (!target.finished()) {
        if (step_locked(issued_only) || transport_->progress()) {
          spin_until = Clock::now() + spin;
          continue;
        }
        auto now = Clock::now();
        if (now >= until) return;
        if (now >= spin_until) sleep_locked(until);
      }
    }
    if (Clock::now() >= until) return;
  }
}

}  // namespace strata::runtime
