#include "process_group.hpp"

#include <c10/util/Exception.h>

#include <numeric>

#include "sparse_sum.hpp"
#include "store_adapter.hpp"
#include "strata/error.hpp"
#include "tensor_lists.hpp"
#include "tensors.hpp"

namespace strata::torch_backend {
namespace {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

}  // namespace

ProcessGroupStrata::ProcessGroupStrata(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                       int size, std::chrono::milliseconds timeout,
                                       const std::string& group_name)
    : c10d::Backend(rank, size), timeout_(timeout) {
  init();  // c10d's logging of the backend's creation
  CommOptions options;
  options.name = "torch:" + group_name;
  options.timeout = timeout;
  try {
    comm_ = Communicator::create(std::make_shared<C10dStore>(store), rank, size, options);
  } catch (...) {
    std::rethrow_exception(torch_exception(std::current_exception()));
  }
}

ProcessGroupStrata::~ProcessGroupStrata() {
  // The completer finishes what is queued; the communicator is released with the last work.
  completer_.reset();
}

void ProcessGroupStrata::abort() {
  if (comm_) comm_.abort();
}

void ProcessGroupStrata::shutdown() {
  if (!comm_) return;
  try {
    last_.wait(timeout_);  // operations finish in issue order: this one finishes last
  } catch (const Error&) {
    comm_.abort();  // failed or stuck: end it here and on the peers rather than hang
  }
  comm_ = Communicator();
}

std::chrono::milliseconds ProcessGroupStrata::deadline(std::chrono::milliseconds op) const {
  return op == c10d::kUnsetTimeout ? timeout_ : op;
}

const at::Tensor& ProcessGroupStrata::single(const std::vector<at::Tensor>& tensors,
                                             const char* op) const {
  TORCH_CHECK_VALUE(tensors.size() == 1, "strata ", op, ": takes one tensor per rank, got ",
                    tensors.size());
  check_tensor(tensors[0], op);
  return tensors[0];
}

void ProcessGroupStrata::root_checks(const char* op, Buffer data,
                                     const std::function<void()>& checks) {
  TORCH_CHECK(comm_, "strata: rank ", getRank(), " used a process group after shutdown()");
  try {
    checks();
  } catch (const c10::Error& e) {
    try {
      comm_.refuse_root_call(op, getRank(), data, ReduceOp::sum, e.what_without_backtrace());
    } catch (const Error&) {  // the same reason: torch's error says it
    }
    throw;
  }
}

WorkPtr ProcessGroupStrata::broadcast(std::vector<at::Tensor>& tensors,
                                      const c10d::BroadcastOptions& opts) {
  Staged t(single(tensors, "broadcast"), "broadcast");
  return run(OpType::BROADCAST, "strata:broadcast", tensors, tensors, opts.timeout,
             [&](StrataWork& w, Communicator& c) {
               w.add(c.broadcast(t.buffer(), int(opts.rootRank)));
               w.on_success([t] { t.finish(); });
             });
}

WorkPtr ProcessGroupStrata::allreduce(std::vector<at::Tensor>& tensors,
                                      const c10d::AllreduceOptions& opts) {
  if (tensors.size() == 1 && tensors[0].is_sparse()) {
    TORCH_CHECK_VALUE(opts.reduceOp == c10d::ReduceOp::SUM, "strata all_reduce: sparse tensors ",
                      "are summed only (as by gloo), not reduced with op ", int(opts.reduceOp.op_));
    return run(OpType::ALLREDUCE, "strata:all_reduce_sparse", tensors, tensors, opts.timeout,
               [&](StrataWork& w, Communicator& c) { issue_sparse_sum(c, tensors[0], w); });
  }
  const at::Tensor& tensor = single(tensors, "all_reduce");
  const Reduction r = reduction(opts.reduceOp, tensor.scalar_type(), "all_reduce");
  Staged t(tensor, "all_reduce");
  if (r.premul) t.flat().mul_(*r.premul);  // in place: the result overwrites it anyway
  return run(OpType::ALLREDUCE, "strata:all_reduce", tensors, tensors, opts.timeout,
             [&](StrataWork& w, Communicator& c) {
               w.add(c.all_reduce(t.buffer(), r.op));
               w.on_success([t] { t.finish(); });
             });
}

WorkPtr ProcessGroupStrata::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK_VALUE(!tensors.empty(), "strata all_reduce_coalesced: no tensors");
  std::vector<Staged> staged;
  std::vector<Reduction> rs;
  for (const auto& tensor : tensors) {
    rs.push_back(reduction(opts.reduceOp, tensor.scalar_type(), "all_reduce_coalesced"));
    staged.emplace_back(tensor, "all_reduce_coalesced");
    if (rs.back().premul) staged.back().flat().mul_(*rs.back().premul);
  }
  return run(OpType::ALLREDUCE_COALESCED, "strata:all_reduce_coalesced", tensors, tensors,
             opts.timeout, [&](StrataWork& w, Communicator& c) {
               for (size_t i = 0; i < staged.size(); ++i) {
                 w.add(c.all_reduce(staged[i].buffer(), rs[i].op));
               }
               w.on_success([staged] {
                 for (const auto& t : staged) t.finish();
               });
             });
}

WorkPtr ProcessGroupStrata::reduce(std::vector<at::Tensor>& tensors,
                                   const c10d::ReduceOptions& opts) {
  const at::Tensor& tensor = single(tensors, "reduce");
  const Reduction r = reduction(opts.reduceOp, tensor.scalar_type(), "reduce");
  Staged t(tensor, "reduce");
  const at::Tensor input = premultiplied(t.flat(), r);  // non-roots keep their tensor as it was
  const bool root = getRank() == opts.rootRank;
  return run(OpType::REDUCE, "strata:reduce", tensors, tensors, opts.timeout,
             [&](StrataWork& w, Communicator& c) {
               w.add(c.reduce(view(input, "reduce"), t.buffer(), r.op, int(opts.rootRank)));
               w.on_success([t, input, root] {
                 if (root) t.finish();
               });
             });
}

WorkPtr ProcessGroupStrata::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  TORCH_CHECK_VALUE(tag >= 0, "strata send: negative tag ", tag);
  const at::Tensor t = single(tensors, "send").contiguous();
  return peer_op(OpType::SEND, "strata:send", {t},
                 {PeerOp::send, view(t, "send"), dst, uint32_t(tag)}, [t] {});
}

WorkPtr ProcessGroupStrata::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  return receive(tensors, src, tag, OpType::RECV, "strata:recv");
}

WorkPtr ProcessGroupStrata::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  return receive(tensors, kAnySource, tag, OpType::RECVANYSOURCE, "strata:recvAnySource");
}

WorkPtr ProcessGroupStrata::receive(std::vector<at::Tensor>& tensors, int src, int tag, OpType type,
                                    const char* title) {
  TORCH_CHECK_VALUE(tag >= 0, "strata recv: negative tag ", tag);
  Staged t(single(tensors, "recv"), "recv");
  // The profiler records a receive with its tensor's shape, as gloo does.
  return peer_op(type, title, tensors, {PeerOp::recv, t.buffer(), src, uint32_t(tag)},
                 [t] { t.finish(); });
}

WorkPtr ProcessGroupStrata::peer_op(OpType type, const char* title,
                                    const std::vector<at::Tensor>& tensors, PeerOp op,
                                    std::function<void()> finisher) {
  const bool sends = op.kind == PeerOp::send;
  if (!coalescing_) {
    return run(
        type, title, tensors, sends ? std::vector<at::Tensor>{} : tensors, c10d::kUnsetTimeout,
        [&](StrataWork& w, Communicator& c) {
          w.add(sends ? c.send(op.buffer, op.peer, op.tag) : c.recv(op.buffer, op.peer, op.tag));
          w.on_success(std::move(finisher));
        });
  }
  auto work = c10::make_intrusive<StrataWork>(
      getRank(), type, title, tensors, sends ? std::vector<at::Tensor>{} : tensors,
      deadline(c10d::kUnsetTimeout), CallStream(call_device(tensors, {}, title)), comm_);
  work->on_success(std::move(finisher));
  kept_.push_back({work, op, tensors[0]});
  return work;
}

void ProcessGroupStrata::startCoalescing() {
  TORCH_CHECK(!coalescing_, "strata: startCoalescing() twice without endCoalescing()");
  coalescing_ = true;
}

WorkPtr ProcessGroupStrata::endCoalescing() {
  TORCH_CHECK(coalescing_, "strata: endCoalescing() without startCoalescing()");
  coalescing_ = false;
  std::vector<Kept> kept = std::move(kept_);
  std::vector<strata::Work> before = std::move(coalesced_);
  kept_.clear();
  coalesced_.clear();
  std::vector<PeerOp> ops;
  std::vector<at::Tensor> sent, received;
  for (const Kept& k : kept) {
    ops.push_back(k.op);
    (k.op.kind == PeerOp::send ? sent : received).push_back(k.tensor);
  }
  WorkPtr all = run(OpType::COALESCED, "strata:coalesced", sent, received, c10d::kUnsetTimeout,
                    [&](StrataWork& w, Communicator& c) {
                      for (const strata::Work& b : before) w.add(b);
                      std::vector<strata::Work> works = c.send_recv(ops);
                      for (size_t i = 0; i < works.size(); ++i) {
                        kept[i].work->add(works[i]);
                        w.add(works[i]);
                      }
                    });
  for (const Kept& k : kept) k.work->issued(completer_->queue());
  return all;
}

WorkPtr ProcessGroupStrata::barrier(const c10d::BarrierOptions& opts) {
  return run(OpType::BARRIER, "strata:barrier", {}, {}, opts.timeout,
             [&](StrataWork& w, Communicator& c) { w.add(c.barrier()); });
}

}  // namespace strata::torch_backend
