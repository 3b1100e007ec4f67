// ProcessGroupStrata: the torch.distributed backend "strata" for CPU and CUDA tensors. Every
// operation torch's gloo backend offers, issued asynchronously on one Strata communicator (CUDA
// tensors by its device path: NCCL, or staged where ranks share a GPU); see work.hpp for how
// each completes and docs/bindings.md for what is not supported and why.
#pragma once

#include <c10/util/Exception.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "strata/communicator.hpp"
#include "strata/error.hpp"
#include "work.hpp"

namespace strata::torch_backend {

class ProcessGroupStrata final : public c10d::Backend {
 public:
  /// Collective over the `size` ranks sharing `store`: builds the Strata communicator named
  /// `group_name` (errors read "group torch:<name>"), every operation's deadline `timeout`.
  ProcessGroupStrata(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout, const std::string& group_name);
  ~ProcessGroupStrata() override;

  const std::string getBackendName() const override { return "strata"; }
  uint64_t getSequenceNumberForGroup() override { return seq_.load(); }
  void setTimeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }
  /// Ends the group like ncclCommAbort: pending operations fail here and on the peers.
  void abort() override;
  /// Waits for this rank's pending operations (aborting if they fail or outlast the timeout),
  /// then releases the group. Local, like ncclCommDestroy: no collective with the peers.
  void shutdown() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> all_gather_single(at::Tensor& output, at::Tensor& input,
                                                   const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> all_gather_single_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather_single(at::Tensor& output, at::Tensor& input,
                                               const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> all_to_all_single(at::Tensor& output, at::Tensor& input,
                                                   std::vector<int64_t>& output_splits,
                                                   std::vector<int64_t>& input_splits,
                                                   const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  /// The sender is the work's sourceRank() once complete.
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  /// Rank 0 names the ranks that did not arrive within the timeout (monitored_barrier.cpp).
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

  /// Coalescing, as ProcessGroupNCCL's (batch_isend_irecv, _coalescing_manager): the sends and
  /// receives between start and end are issued together at the end (Communicator::send_recv:
  /// one ncclGroupStart/End on the NCCL path, so a ring of sends before receives cannot
  /// deadlock), and the end's work completes when every operation issued since the start has.
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

 private:
  /// Builds the work, lets `issue` add its Strata operations and finisher, and returns it;
  /// an error while issuing is raised as torch's (ValueError for bad arguments).
  template <typename Issue>
  c10::intrusive_ptr<c10d::Work> run(c10d::OpType type, const char* title,
                                     const std::vector<at::Tensor>& inputs,
                                     std::vector<at::Tensor> outputs,
                                     std::chrono::milliseconds timeout, Issue&& issue);
  std::chrono::milliseconds deadline(std::chrono::milliseconds op_timeout) const;
  /// recv and recvAnysource (`src` kAnySource).
  c10::intrusive_ptr<c10d::Work> receive(std::vector<at::Tensor>& tensors, int src, int tag,
                                         c10d::OpType type, const char* title);
  /// A send or receive: issued now, or while coalescing kept for endCoalescing.
  c10::intrusive_ptr<c10d::Work> peer_op(c10d::OpType type, const char* title,
                                         const std::vector<at::Tensor>& tensors, PeerOp op,
                                         std::function<void()> finisher);
  /// Runs the checks only the root of `op` can make; a failure is told to the other ranks
  /// first (Communicator::refuse_root_call), so their call fails naming this rank instead of
  /// waiting for it. `data` is the buffer every rank passes.
  void root_checks(const char* op, Buffer data, const std::function<void()>& checks);
  /// One tensor per rank and per call, as torch's CPU backends take it.
  const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* op) const;

  Communicator comm_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Completer> completer_ = std::make_unique<Completer>();
  std::mutex issue_mu_;  // run(): one thread issues at a time
  // Between startCoalescing and endCoalescing: the sends and receives kept (their works handed
  // out already), and the operations issued meanwhile, which the end's work waits for.
  struct Kept {
    c10::intrusive_ptr<StrataWork> work;
    PeerOp op;
    at::Tensor tensor;
  };
  bool coalescing_ = false;
  std::vector<Kept> kept_;
  std::vector<strata::Work> coalesced_;
  std::atomic<uint64_t> seq_{0};
  strata::Work last_;  // the last operation issued
};

// Every operation's common part (process_group.cpp and process_group_lists.cpp issue through it).
// A call on CUDA tensors is issued on its device and on the caller's current stream there
// (call_stream.hpp), so it runs after the work queued on that stream, staging copies included.
template <typename Issue>
c10::intrusive_ptr<c10d::Work> ProcessGroupStrata::run(c10d::OpType type, const char* title,
                                                       const std::vector<at::Tensor>& inputs,
                                                       std::vector<at::Tensor> outputs,
                                                       std::chrono::milliseconds timeout,
                                                       Issue&& issue) {
  TORCH_CHECK(comm_, "strata: rank ", getRank(), " used a process group after shutdown()");
  const CallStream stream(call_device(inputs, outputs, title));
  auto work = c10::make_intrusive<StrataWork>(getRank(), type, title, inputs, std::move(outputs),
                                              deadline(timeout), stream, comm_);
  // torch calls from more than one thread (DDP on CUDA issues from autograd's device thread);
  // its callers keep one order on every rank, as ProcessGroupNCCL requires, so the calling
  // thread takes the issuing over, one call at a time.
  std::lock_guard<std::mutex> one_at_a_time(issue_mu_);
  comm_.issue_from_this_thread();
  try {
    stream.run([&] {
      Communicator on = stream.cuda() ? comm_.on_stream(stream.native()) : comm_;
      issue(*work, on);
    });
  } catch (const Error&) {
    std::rethrow_exception(torch_exception(std::current_exception()));
  }
  ++seq_;
  last_ = work->last_operation();
  if (coalescing_) {
    for (const strata::Work& w : work->operations()) coalesced_.push_back(w);
  }
  work->issued(completer_->queue());
  return work;
}

}  // namespace strata::torch_backend
