// The c10d::Work of the strata backend, and the thread that completes works nobody waits for.
//
// One torch operation is one or more Strata operations on one communicator (a coalesced
// all-reduce is one per tensor) plus a finisher run after they all succeed: copying results back
// into non-contiguous or list outputs. A work completes exactly once, on whichever thread gets
// there first: the thread in wait(), or the backend's Completer, which Strata's completion
// callback wakes (the callback itself only queues: torch code never runs on Strata's progress
// thread). Completing marks the future with the outputs (DDP's comm hooks chain on it) and ends
// the profiler's record of the op. A call on CUDA tensors runs its finisher and marks its future
// on the call's stream (call_stream.hpp): the future then knows the device, as torch's
// CUDA-aware futures do, and wait() leaves the caller's current stream ordered after it. Every
// such call but a receive is on the stream once issued (NCCL enqueued it; the staged path
// returns with its output copies queued), so its finisher and future follow at once and wait()
// does not block the host; a receive's output is written when it is waited on (staged path).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "call_stream.hpp"
#include "strata/communicator.hpp"
#include "strata/work.hpp"

namespace strata::torch_backend {

class CompletionQueue;

class StrataWork final : public c10d::Work {
 public:
  /// `outputs` is what result() and the future give; `timeout` bounds wait() without argument;
  /// `stream` is the call's (a default one for CPU tensors); `group` is the group it runs on,
  /// which a Ctrl-C during wait() aborts (ctrl_c.hpp).
  StrataWork(int rank, c10d::OpType type, const char* profiling_title,
             const std::vector<at::Tensor>& inputs, std::vector<at::Tensor> outputs,
             std::chrono::milliseconds timeout, CallStream stream, Communicator group);

  /// Issuing, on the caller's thread: the Strata operations, then the finisher.
  void add(strata::Work w) { works_.push_back(std::move(w)); }
  void on_success(std::function<void()> finisher) { finisher_ = std::move(finisher); }
  const std::vector<strata::Work>& operations() const { return works_; }
  /// The operation that finishes last (a finished one when there is none).
  strata::Work last_operation() const { return works_.empty() ? strata::Work() : works_.back(); }
  /// After issuing: completes at once if Strata already has (Work::test(), which runs the
  /// collective here when every rank has issued it, and never waits for one that has not),
  /// otherwise hands the work to `queue` when its last operation finishes (operations on one
  /// communicator finish in issue order).
  void issued(const std::shared_ptr<CompletionQueue>& queue);

  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::vector<at::Tensor> result() override { return outputs_; }
  std::chrono::milliseconds getTimeout() const override { return timeout_; }
  /// The sender of a completed receive (torch's Work._source_rank()).
  int sourceRank() const override;

  /// A CUDA call other than a receive (or a coalesced batch, which may hold receives): all of
  /// it is queued on its stream when issued.
  bool on_stream_when_issued() const;
  /// Runs the finisher and finishes the work (once; later calls return at once). Every
  /// operation must have completed.
  void complete();

 private:
  bool wait_on_host(std::chrono::milliseconds timeout);
  bool last_operation_finished() const;  // Work::test() of the last; true if it failed
  std::vector<strata::Work> works_;
  std::function<void()> finisher_;
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds timeout_;
  CallStream stream_;
  Communicator group_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::atomic<bool> claimed_{false};
};

/// Where Strata's completion callbacks queue finished works: shared by the callbacks and the
/// Completer's thread, so a callback firing after the backend is gone finds it still there.
class CompletionQueue {
 public:
  /// Queues `work`; completes it on this thread instead once the Completer has stopped.
  void push(c10::intrusive_ptr<StrataWork> work);
  /// Completes queued works until stop() and the queue is empty.
  void serve();
  void stop();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<StrataWork>> queue_;
  bool stopping_ = false;
  bool stopped_ = false;
};

/// One thread per backend completing the works Strata reports finished.
class Completer {
 public:
  Completer();
  ~Completer();  ///< completes what is queued, then joins
  const std::shared_ptr<CompletionQueue>& queue() const { return queue_; }

 private:
  std::shared_ptr<CompletionQueue> queue_ = std::make_shared<CompletionQueue>();
  std::thread thread_;
};

/// A Strata error (or any other) as the exception torch raises: DistBackendError for failures of
/// the group (timeout, dead peer, abort), the message naming rank, group, op and peer.
std::exception_ptr torch_exception(std::exception_ptr e);

}  // namespace strata::torch_backend
