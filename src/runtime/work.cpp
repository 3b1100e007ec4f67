#include "strata/work.hpp"

#include <algorithm>
#include <thread>

#include "runtime/op_queue.hpp"
#include "runtime/work_state.hpp"

namespace strata {

using namespace std::chrono_literals;

void Work::wait(std::chrono::milliseconds timeout) const {
  if (!state_) return;
  const auto until = Clock::now() + timeout;
  if (state_->poll) {
    for (int polls = 0; !state_->poll() && Clock::now() < until; ++polls) {
      if (polls > 1000) std::this_thread::sleep_for(20us);
    }
  }
  if (auto queue = state_->queue.lock()) queue->drive(*state_, until);
  // The op queue is gone or another thread drives: wait for its notification, bounded.
  if (!state_->finished()) state_->sleep_until(until);
  const auto status = state_->status.load(std::memory_order_acquire);
  if (status == detail::WorkState::Status::failed) std::rethrow_exception(state_->error);
  if (status != detail::WorkState::Status::done) {
    throw Error(ErrorCode::timeout, state_->where,
                "Work::wait: not complete after " + std::to_string(timeout.count()) +
                    " ms; the operation is still pending (its own deadline, the "
                    "communicator's, is " +
                    std::to_string(state_->default_timeout.count()) + " ms)");
  }
}

void Work::wait() const {
  if (!state_) return;
  // The grace lets an operation's own deadline, which names its peer, fire first.
  const auto window =
      state_->default_timeout + std::min<std::chrono::milliseconds>(state_->default_timeout, 5s);
  if (state_->poll) return wait(window);
  for (;;) {
    auto queue = state_->queue.lock();
    if (!queue) return wait(window);  // the group is gone: the operation has ended
    const uint64_t before = queue->finished();
    const auto until = Clock::now() + window;
    queue->drive(*state_, until);
    if (!state_->finished()) state_->sleep_until(until);
    if (state_->finished()) return wait(std::chrono::milliseconds(0));  // its result
    if (queue->finished() != before) continue;  // operations ahead of it are completing
    queue->abort();
    throw Error(ErrorCode::timeout, state_->where,
                "Work::wait: no operation of the communicator completed in " +
                    std::to_string(window.count()) +
                    " ms while this one was pending; the communicator is aborted");
  }
}

bool Work::test() const {
  if (!state_) return true;
  if (state_->poll) state_->poll();
  if (auto queue = state_->queue.lock()) queue->drive(*state_, Clock::now(), true);
  const auto status = state_->status.load(std::memory_order_acquire);
  if (status == detail::WorkState::Status::failed) std::rethrow_exception(state_->error);
  return status == detail::WorkState::Status::done;
}

void Work::on_complete(std::function<void()> callback) const {
  if (!state_) return callback();  // a default-constructed Work is complete
  state_->add_callback(std::move(callback));
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
