#include "strata/work.hpp"

#include "runtime/op_queue.hpp"
#include "runtime/work_state.hpp"

namespace strata {

void Work::wait(std::chrono::milliseconds timeout) const {
  if (!state_) return;
  const auto until = Clock::now() + timeout;
  if (auto queue = state_->queue.lock()) queue->drive(*state_, until);
  // The op queue is gone or another thread drives: wait for its notification, bounded.
  if (!state_->finished()) state_->sleep_until(until);
  const auto status = state_->status.load(std::memory_order_acquire);
  if (status == detail::WorkState::Status::failed) std::rethrow_exception(state_->error);
  if (status != detail::WorkState::Status::done) {
    throw Error(ErrorCode::timeout, {.op = "Work::wait"},
                "not complete after " + std::to_string(timeout.count()) +
                    " ms; the operation is still pending (its own deadline is STRATA_TIMEOUT)");
  }
}

void Work::wait() const {
  if (state_) wait(state_->default_timeout + std::chrono::seconds(5));
}

bool Work::test() const {
  if (!state_) return true;
  if (auto queue = state_->queue.lock()) queue->drive(*state_, Clock::now());
  const auto status = state_->status.load(std::memory_order_acquire);
  if (status == detail::WorkState::Status::failed) std::rethrow_exception(state_->error);
  return status == detail::WorkState::Status::done;
}

void Work::on_complete(std::function<void()> callback) const {
  if (!state_) return callback();  // a default-constructed Work is complete
  state_->set_callback(std::move(callback));
}

double Work::elapsed_seconds() const {
  if (!state_ || !state_->finished()) return 0;
  return std::chrono::duration<double>(state_->end - state_->start).count();
}

int Work::source() const {
  return state_ && state_->status.load(std::memory_order_acquire) == detail::WorkState::Status::done
             ? state_->source
             : -1;
}

}  // namespace strata
