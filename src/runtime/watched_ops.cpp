// The op queue's watched operations (OpQueue::watch): ones that something else orders, a NCCL
// call by its CUDA stream, finished by polling instead of being queued. Split from
// op_queue.cpp, which runs the queued ones.
#include "runtime/op_queue.hpp"

namespace strata::runtime {

std::shared_ptr<detail::WorkState> OpQueue::watch(const ErrorContext& where, DataType dtype,
                                                  size_t count,
                                                  std::function<void(detail::WorkState&)> step,
                                                  std::function<void()> on_failure) {
  auto work = std::make_shared<detail::WorkState>();
  work->default_timeout = timeout_;
  work->where = where;
  const auto now = Clock::now();
  work->mark_running(now);
  const uint64_t record = recorder_.running(where, true, dtype, count, now);
  // The queue through a weak pointer: a Work may be polled after its group is gone.
  work->poll = [queue = weak_from_this(), self = work.get(), record, step = std::move(step),
                on_failure = std::move(on_failure), where, next_check = now,
                mu = std::make_shared<std::mutex>()]() mutable {
    std::lock_guard<std::mutex> l(*mu);
    if (self->finished()) return true;
    const auto q = queue.lock();
    try {
      if (!q) {
        throw Error(ErrorCode::aborted, where,
                    "communicator destroyed with the operation still pending");
      }
      step(*self);
      if (const auto t = Clock::now(); !self->finished() && t >= next_check) {
        q->check_health(where);  // a peer's death or an abort, which the operation cannot see
        next_check = t + kHealthInterval;
      }
    } catch (const std::exception& e) {
      self->complete(std::current_exception(), Clock::now());
      if (on_failure) on_failure();
      if (!q) return true;
      q->recorder_.ended(record, e.what());
      const auto* err = dynamic_cast<const Error*>(&e);
      if (err && err->code() == ErrorCode::timeout) {
        q->recorder_.report("timeout in " + where.op + " seq " + std::to_string(where.seq));
      }
    }
    if (!self->finished()) return false;
    if (self->status.load() == detail::WorkState::Status::done) q->recorder_.ended(record);
    q->finished_.fetch_add(1, std::memory_order_relaxed);
    return true;
  };
  {
    std::lock_guard<std::mutex> l(watched_mu_);
    watched_.push_back(work);
  }
  arm_kick(0);
  return work;
}

int OpQueue::poll_watched(int idle_ms) {
  // Polled without the lock, which watch() needs: a poll may take microseconds (a CUDA event's
  // query). Only this thread takes from the front. The newest first: where operations complete
  // in order (a stream's), its completion completes the older ones without a query of their own.
  auto at = [this](bool newest) -> std::shared_ptr<detail::WorkState> {
    std::lock_guard<std::mutex> l(watched_mu_);
    return watched_.empty() ? nullptr : newest ? watched_.back() : watched_.front();
  };
  if (const auto w = at(true)) w->poll();
  while (const auto w = at(false)) {
    if (!w->poll()) return std::min(idle_ms, int(kWatchInterval.count()));
    std::lock_guard<std::mutex> l(watched_mu_);
    watched_.pop_front();
  }
  return idle_ms;
}

void OpQueue::check_health(const ErrorContext& where) {
  if (std::unique_lock<std::mutex> ex(exec_mu_, std::try_to_lock); ex.owns_lock()) {
    health_->check(where);
  } else if (health_->failed()) {
    throw health_->failure(where);
  }
}

}  // namespace strata::runtime
