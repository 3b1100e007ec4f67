#include "work.hpp"

#include <c10/util/Exception.h>
#include <torch/csrc/utils/pybind.h>

#include "ctrl_c.hpp"
#include "strata/error.hpp"

namespace strata::torch_backend {
namespace {
thread_local const StrataWork* t_waiting_on = nullptr;  // the work this thread's wait() runs
}  // namespace

std::exception_ptr torch_exception(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    const c10::SourceLocation where{__func__, __FILE__, uint32_t(__LINE__)};
    if (err.code() == ErrorCode::invalid_argument) {
      return std::make_exception_ptr(c10::ValueError(where, err.what()));
    }
    // torch's backends say "Timed out" / "timeout" in so many words; so do we.
    const char* why = err.code() == ErrorCode::timeout ? " [the process group timeout passed]" : "";
    return std::make_exception_ptr(c10::DistBackendError(where, err.what() + std::string(why)));
  } catch (...) {
    return std::current_exception();
  }
}

StrataWork::StrataWork(int rank, c10d::OpType type, const char* profiling_title,
                       const std::vector<at::Tensor>& inputs, std::vector<at::Tensor> outputs,
                       std::chrono::milliseconds timeout, CallStream stream, Communicator group)
    : c10d::Work(rank, type, profiling_title, inputs),
      outputs_(std::move(outputs)),
      timeout_(timeout),
      stream_(std::move(stream)),
      group_(std::move(group)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()), stream_.devices())) {}

bool StrataWork::on_stream_when_issued() const {
  const auto type = retrieveOpType();
  return stream_.cuda() && type != c10d::OpType::RECV && type != c10d::OpType::RECVANYSOURCE &&
         type != c10d::OpType::COALESCED;
}

void StrataWork::issued(const std::shared_ptr<CompletionQueue>& queue) {
  if (on_stream_when_issued()) {
    // The copies back and the future follow on the stream now, as ProcessGroupNCCL completes
    // its futures: nobody waits on the host. The staging tensors may go now: they were made on
    // this stream, so the caching allocator reuses them only after what is queued on it.
    stream_.end_with([&] {
      if (finisher_) finisher_();
      future_->markCompleted(c10::IValue(outputs_));
    });
    finisher_ = nullptr;
  }
  if (works_.empty()) {
    complete();
    return;
  }
  if (last_operation_finished()) {
    complete();
    return;
  }
  c10::intrusive_ptr<StrataWork> self = c10::intrusive_ptr<StrataWork>::reclaim_copy(this);
  works_.back().on_complete([queue, self]() mutable {
    // A thread waiting on it completes it next (and holds a reference: dropping ours is safe).
    if (t_waiting_on != self.get()) queue->push(std::move(self));
  });
}

bool StrataWork::last_operation_finished() const {
  try {
    return works_.back().test();
  } catch (const std::exception&) {
    return true;  // failed: complete() records the error
  }
}

int StrataWork::sourceRank() const {
  const auto type = retrieveOpType();
  TORCH_CHECK(type == c10d::OpType::RECV || type == c10d::OpType::RECVANYSOURCE,
              "strata: sourceRank() of a work that is not a receive");
  const int source = last_operation().source();
  TORCH_CHECK(source >= 0, "strata: sourceRank() of a receive that has not completed");
  return source;
}

void StrataWork::complete() {
  if (claimed_.exchange(true)) return;
  std::exception_ptr error;
  try {
    for (const strata::Work& w : works_) w.wait();
    // On a CUDA call's stream, after the collective: copies into the user's tensors, then the
    // end event wait() orders the caller's stream after (issued() did both for a call on the
    // stream once issued). Recorded before finish() wakes a waiter.
    if (!on_stream_when_issued()) {
      stream_.end_with([&] {
        if (finisher_) finisher_();
      });
    }
  } catch (...) {
    error = torch_exception(std::current_exception());
  }
  finisher_ = nullptr;  // frees the staging buffers now, not with the Work
  finish(error);
  if (future_->completed()) return;  // on the stream when issued: a later failure shows in wait()
  if (error) {
    future_->setError(error);
  } else {
    // CUDA: the future records its events on the call's stream, after the finisher.
    stream_.run([&] { future_->markCompleted(c10::IValue(outputs_)); });
  }
}

bool StrataWork::wait(std::chrono::milliseconds timeout) {
  if (on_stream_when_issued()) {
    // No host wait, as ProcessGroupNCCL by default: the caller's stream waits for the call's.
    // A failure known by now raises; a later one fails the next call (the group is aborted).
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (exception_) std::rethrow_exception(exception_);
    }
    stream_.order_current_stream_after();
    return true;
  }
  const CtrlC ctrl_c(group_);
  try {
    return wait_on_host(timeout);
  } catch (...) {
    ctrl_c.raise_if_interrupted();
    throw;
  }
}

bool StrataWork::wait_on_host(std::chrono::milliseconds timeout) {
  const auto limit = timeout == kNoTimeout ? timeout_ : timeout;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  if (!claimed_.load()) {
    // Wait on Strata directly (it polls), then complete on this thread: no hand-off to the
    // Completer on the latency path of a blocking collective. Run here, the completion callback
    // leaves the work to this thread: waking the Completer would cost a context switch a call
    // (on two vCPUs it preempts the peer).
    const StrataWork* const outer = t_waiting_on;
    t_waiting_on = this;
    bool all_done = true;
    for (const strata::Work& w : works_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      try {
        w.wait(std::max(left, std::chrono::milliseconds(0)));
      } catch (const Error&) {
        bool finished = true;
        try {
          finished = w.test();
        } catch (const Error&) {
        }
        all_done = finished;  // false: our deadline passed, the operation still runs
        break;
      }
    }
    t_waiting_on = outer;
    if (all_done) complete();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (!cv_.wait_until(lock, deadline, [&] { return completed_; })) {
    C10_THROW_ERROR(DistBackendError, "strata: wait() on rank " + std::to_string(rank_) + " for " +
                                          c10d::opTypeToString(opType_) + " timed out after " +
                                          std::to_string(limit.count()) +
                                          " ms; the operation is still running");
  }
  if (exception_) std::rethrow_exception(exception_);
  stream_.order_current_stream_after();
  return true;
}

void CompletionQueue::push(c10::intrusive_ptr<StrataWork> work) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!stopped_) {
      queue_.push_back(std::move(work));
      cv_.notify_one();
      return;
    }
  }
  work->complete();
}

void CompletionQueue::serve() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping, and nothing left
    auto work = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    work->complete();
    work.reset();  // the last reference may free tensors: outside the lock
    lock.lock();
  }
  stopped_ = true;
}

void CompletionQueue::stop() {
  std::lock_guard<std::mutex> l(mu_);
  stopping_ = true;
  cv_.notify_one();
}

Completer::Completer() : thread_([q = queue_] { q->serve(); }) {}

Completer::~Completer() {
  queue_->stop();
  // The backend can die on the completer's own thread (a future callback holding the last
  // reference); serve() needs only the queue, so the thread may finish on its own then.
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();
  } else if (Py_IsInitialized() && PyGILState_Check()) {
    // The backend dies with the GIL held (its Python object freed); the thread may be freeing
    // a work's last tensors, whose Python objects need the GIL.
    pybind11::gil_scoped_release unlocked;
    thread_.join();
  } else {
    thread_.join();
  }
}

}  // namespace strata::torch_backend
