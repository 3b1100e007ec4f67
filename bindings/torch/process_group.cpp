#include "process_group.hpp"

#include <c10/util/Exception.h>

#include <numeric>

#include "sparse_sum.hpp"
#include "store_adapter.hpp"
#include "strata/error.hpp"
#include "tensors.hpp"

namespace strata::torch_backend {
namespace {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

// All tensors of a list operation share one dtype and live on the CPU.
void check_same_dtype(const std::vector<at::Tensor>& ts, at::ScalarType dtype, const char* op) {
  for (const auto& t : ts) {
    check_tensor(t, op);
    TORCH_CHECK_TYPE(t.scalar_type() == dtype, "strata ", op, ": tensors of dtype ",
                     t.scalar_type(), " and ", dtype, " in one call");
  }
}

// Each of `ts` is one rank's block: as many elements as `like`, which is the `like_role` ("an
// input") of this rank, and its dtype.
void check_blocks(const std::vector<at::Tensor>& ts, const at::Tensor& like, const char* op,
                  const char* role, const char* like_role) {
  check_same_dtype(ts, like.scalar_type(), op);
  for (const auto& t : ts) {
    TORCH_CHECK_VALUE(t.numel() == like.numel(), "strata ", op, ": ", role, " of ", t.numel(),
                      " elements for ", like_role, " of ", like.numel());
  }
}

// The tensors concatenated, flat and contiguous: what a list operation sends.
at::Tensor flat_cat(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> flat;
  flat.reserve(ts.size());
  for (const auto& t : ts) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

// Copies consecutive blocks of `flat` into `ts` (the reverse of flat_cat).
void scatter_into(const at::Tensor& flat, const std::vector<at::Tensor>& ts) {
  int64_t at = 0;
  for (const auto& t : ts) {
    t.copy_(flat.narrow(0, at, t.numel()).view(t.sizes()));
    at += t.numel();
  }
}

// `t` multiplied by the PREMUL_SUM factor, as a new tensor (the caller's input stays unchanged).
at::Tensor premultiplied(const at::Tensor& t, const Reduction& r) {
  return r.premul ? (t * *r.premul).contiguous() : t;
}

std::vector<size_t> displacements(const std::vector<size_t>& counts) {
  std::vector<size_t> d(counts.size(), 0);
  std::exclusive_scan(counts.begin(), counts.end(), d.begin(), size_t{0});
  return d;
}

// Elements per rank of one side of all_to_all_single: `splits` rows of `row` elements each, or
// the first dimension divided evenly when `splits` is empty.
std::vector<size_t> split_counts(const at::Tensor& t, const std::vector<int64_t>& splits, int size,
                                 const char* side) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const int64_t row = rows == 0 ? 0 : t.numel() / rows;
  std::vector<size_t> counts(size);
  if (splits.empty()) {
    TORCH_CHECK_VALUE(rows % size == 0, "strata all_to_all_single: ", side, " has ", rows,
                      " rows, not divisible by the group size ", size);
    for (auto& c : counts) c = size_t(rows / size * row);
    return counts;
  }
  TORCH_CHECK_VALUE(int(splits.size()) == size, "strata all_to_all_single: ", splits.size(), " ",
                    side, " splits for a group of ", size);
  int64_t total = 0;
  for (int r = 0; r < size; ++r) {
    TORCH_CHECK_VALUE(splits[r] >= 0, "strata all_to_all_single: negative ", side, " split ",
                      splits[r], " for rank ", r);
    counts[r] = size_t(splits[r] * row);
    total += splits[r];
  }
  TORCH_CHECK_VALUE(total == rows, "strata all_to_all_single: ", side, " splits sum to ", total,
                    " but the tensor has ", rows, " rows");
  return counts;
}

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

template <typename Issue>
WorkPtr ProcessGroupStrata::run(OpType type, const char* title,
                                const std::vector<at::Tensor>& inputs,
                                std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout,
                                Issue&& issue) {
  TORCH_CHECK(comm_, "strata: rank ", getRank(), " used a process group after shutdown()");
  auto work = c10::make_intrusive<StrataWork>(getRank(), type, title, inputs, std::move(outputs),
                                              deadline(timeout));
  try {
    issue(*work);
  } catch (const Error&) {
    std::rethrow_exception(torch_exception(std::current_exception()));
  }
  ++seq_;
  last_ = work->last_operation();
  work->issued(completer_->queue());
  return work;
}

WorkPtr ProcessGroupStrata::broadcast(std::vector<at::Tensor>& tensors,
                                      const c10d::BroadcastOptions& opts) {
  Staged t(single(tensors, "broadcast"), "broadcast");
  return run(OpType::BROADCAST, "strata:broadcast", tensors, tensors, opts.timeout,
             [&](StrataWork& w) {
               w.add(comm_.broadcast(t.buffer(), int(opts.rootRank)));
               w.on_success([t] { t.finish(); });
             });
}

WorkPtr ProcessGroupStrata::allreduce(std::vector<at::Tensor>& tensors,
                                      const c10d::AllreduceOptions& opts) {
  if (tensors.size() == 1 && tensors[0].is_sparse()) {
    TORCH_CHECK_VALUE(opts.reduceOp == c10d::ReduceOp::SUM, "strata all_reduce: sparse tensors ",
                      "are summed only (as by gloo), not reduced with op ", int(opts.reduceOp.op_));
    return run(OpType::ALLREDUCE, "strata:all_reduce_sparse", tensors, tensors, opts.timeout,
               [&](StrataWork& w) { issue_sparse_sum(comm_, tensors[0], w); });
  }
  const at::Tensor& tensor = single(tensors, "all_reduce");
  const Reduction r = reduction(opts.reduceOp, tensor.scalar_type(), "all_reduce");
  Staged t(tensor, "all_reduce");
  if (r.premul) t.flat().mul_(*r.premul);  // in place: the result overwrites it anyway
  return run(OpType::ALLREDUCE, "strata:all_reduce", tensors, tensors, opts.timeout,
             [&](StrataWork& w) {
               w.add(comm_.all_reduce(t.buffer(), r.op));
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
             opts.timeout, [&](StrataWork& w) {
               for (size_t i = 0; i < staged.size(); ++i) {
                 w.add(comm_.all_reduce(staged[i].buffer(), rs[i].op));
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
  return run(OpType::REDUCE, "strata:reduce", tensors, tensors, opts.timeout, [&](StrataWork& w) {
    w.add(comm_.reduce(view(input, "reduce"), t.buffer(), r.op, int(opts.rootRank)));
    w.on_success([t, input, root] {
      if (root) t.finish();
    });
  });
}

WorkPtr ProcessGroupStrata::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                      std::vector<at::Tensor>& inputs,
                                      const c10d::AllgatherOptions& opts) {
  Staged in(single(inputs, "all_gather"), "all_gather");
  TORCH_CHECK_VALUE(outputs.size() == 1 && int(outputs[0].size()) == getSize(),
                    "strata all_gather: needs one list of ", getSize(), " output tensors");
  const auto& outs = outputs[0];
  check_blocks(outs, in.flat(), "all_gather", "output", "an input");
  at::Tensor flat = at::empty({in.flat().numel() * getSize()}, in.flat().options());
  return run(OpType::ALLGATHER, "strata:all_gather", inputs, outs, opts.timeout,
             [&](StrataWork& w) {
               w.add(comm_.all_gather(in.buffer(), view(flat, "all_gather")));
               w.on_success([in, flat, outs] { scatter_into(flat, outs); });
             });
}

WorkPtr ProcessGroupStrata::all_gather_single(at::Tensor& output, at::Tensor& input,
                                              const c10d::AllgatherOptions& opts) {
  Staged in(input, "all_gather_into_tensor"), out(output, "all_gather_into_tensor");
  return run(OpType::_ALLGATHER_BASE, "strata:all_gather_into_tensor", {input}, {output},
             opts.timeout, [&](StrataWork& w) {
               w.add(comm_.all_gather(in.buffer(), out.buffer()));
               w.on_success([in, out] { out.finish(); });
             });
}

WorkPtr ProcessGroupStrata::allgather_coalesced(std::vector<std::vector<at::Tensor>>& output_lists,
                                                std::vector<at::Tensor>& inputs,
                                                const c10d::AllgatherOptions& opts) {
  // output_lists[r][i] receives rank r's inputs[i].
  TORCH_CHECK_VALUE(int(output_lists.size()) == getSize(),
                    "strata all_gather_coalesced: ", output_lists.size(),
                    " output lists for a group of ", getSize());
  for (const auto& list : output_lists) {
    TORCH_CHECK_VALUE(list.size() == inputs.size(), "strata all_gather_coalesced: an output ",
                      "list of ", list.size(), " tensors for ", inputs.size(), " inputs");
  }
  TORCH_CHECK_VALUE(!inputs.empty(), "strata all_gather_coalesced: no tensors");
  check_same_dtype(inputs, inputs[0].scalar_type(), "all_gather_coalesced");
  const at::Tensor in = flat_cat(inputs);
  std::vector<at::Tensor> outs;  // rank by rank, tensor by tensor: the order of `flat`
  for (const auto& list : output_lists) {
    for (size_t i = 0; i < list.size(); ++i) {
      check_blocks({list[i]}, inputs[i], "all_gather_coalesced", "output", "an input");
    }
    outs.insert(outs.end(), list.begin(), list.end());
  }
  at::Tensor flat = at::empty({in.numel() * getSize()}, in.options());
  return run(OpType::ALLGATHER_COALESCED, "strata:all_gather_coalesced", inputs, outs, opts.timeout,
             [&](StrataWork& w) {
               w.add(comm_.all_gather(view(in, "all_gather_coalesced"),
                                      view(flat, "all_gather_coalesced")));
               w.on_success([in, flat, outs] { scatter_into(flat, outs); });
             });
}

WorkPtr ProcessGroupStrata::all_gather_single_coalesced(std::vector<at::Tensor>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(),
                    "strata all_gather_into_tensor_coalesced: ", outputs.size(), " outputs for ",
                    inputs.size(), " inputs");
  std::vector<Staged> ins, outs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ins.emplace_back(inputs[i], "all_gather_into_tensor_coalesced");
    outs.emplace_back(outputs[i], "all_gather_into_tensor_coalesced");
  }
  return run(OpType::ALLGATHER_INTO_TENSOR_COALESCED, "strata:all_gather_into_tensor_coalesced",
             inputs, outputs, opts.timeout, [&](StrataWork& w) {
               for (size_t i = 0; i < ins.size(); ++i) {
                 w.add(comm_.all_gather(ins[i].buffer(), outs[i].buffer()));
               }
               w.on_success([ins, outs] {
                 for (const auto& o : outs) o.finish();
               });
             });
}

WorkPtr ProcessGroupStrata::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                   std::vector<at::Tensor>& inputs,
                                   const c10d::GatherOptions& opts) {
  Staged in(single(inputs, "gather"), "gather");
  const bool root = getRank() == opts.rootRank;
  std::vector<at::Tensor> outs;
  at::Tensor flat;
  if (root) {
    TORCH_CHECK_VALUE(outputs.size() == 1 && int(outputs[0].size()) == getSize(),
                      "strata gather: the root needs one list of ", getSize(), " output tensors");
    outs = outputs[0];
    check_blocks(outs, in.flat(), "gather", "output", "an input");
    flat = at::empty({in.flat().numel() * getSize()}, in.flat().options());
  } else {
    TORCH_CHECK_VALUE(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                      "strata gather: only the root (rank ", opts.rootRank, ") takes outputs");
  }
  return run(OpType::GATHER, "strata:gather", inputs, outs, opts.timeout, [&](StrataWork& w) {
    w.add(comm_.gather(in.buffer(), root ? view(flat, "gather") : Buffer{}, int(opts.rootRank)));
    w.on_success([in, flat, outs] {
      if (flat.defined()) scatter_into(flat, outs);
    });
  });
}

WorkPtr ProcessGroupStrata::gather_single(at::Tensor& output, at::Tensor& input,
                                          const c10d::GatherOptions& opts) {
  Staged in(input, "gather_into_tensor");
  const bool root = getRank() == opts.rootRank;
  std::optional<Staged> out;
  if (root) out.emplace(output, "gather_into_tensor");
  return run(OpType::GATHER, "strata:gather_into_tensor", {input}, {output}, opts.timeout,
             [&](StrataWork& w) {
               w.add(comm_.gather(in.buffer(), out ? out->buffer() : Buffer{}, int(opts.rootRank)));
               w.on_success([in, out] {
                 if (out) out->finish();
               });
             });
}

WorkPtr ProcessGroupStrata::scatter(std::vector<at::Tensor>& outputs,
                                    std::vector<std::vector<at::Tensor>>& inputs,
                                    const c10d::ScatterOptions& opts) {
  Staged out(single(outputs, "scatter"), "scatter");
  const bool root = getRank() == opts.rootRank;
  at::Tensor flat;
  if (root) {
    TORCH_CHECK_VALUE(inputs.size() == 1 && int(inputs[0].size()) == getSize(),
                      "strata scatter: the root needs one list of ", getSize(), " input tensors");
    check_blocks(inputs[0], out.flat(), "scatter", "input", "an output");
    flat = flat_cat(inputs[0]);
  } else {
    TORCH_CHECK_VALUE(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                      "strata scatter: only the root (rank ", opts.rootRank, ") takes inputs");
  }
  return run(OpType::SCATTER, "strata:scatter", root ? inputs[0] : std::vector<at::Tensor>{},
             outputs, opts.timeout, [&](StrataWork& w) {
               w.add(comm_.scatter(root ? view(flat, "scatter") : Buffer{}, out.buffer(),
                                   int(opts.rootRank)));
               w.on_success([out, flat] { out.finish(); });
             });
}

WorkPtr ProcessGroupStrata::reduce_scatter(std::vector<at::Tensor>& outputs,
                                           std::vector<std::vector<at::Tensor>>& inputs,
                                           const c10d::ReduceScatterOptions& opts) {
  Staged out(single(outputs, "reduce_scatter"), "reduce_scatter");
  TORCH_CHECK_VALUE(inputs.size() == 1 && int(inputs[0].size()) == getSize(),
                    "strata reduce_scatter: needs one list of ", getSize(), " input tensors");
  check_blocks(inputs[0], out.flat(), "reduce_scatter", "input", "an output");
  const Reduction r = reduction(opts.reduceOp, out.flat().scalar_type(), "reduce_scatter");
  at::Tensor flat = flat_cat(inputs[0]);  // a copy: scaling it leaves the inputs unchanged
  if (r.premul) flat.mul_(*r.premul);
  return run(OpType::REDUCE_SCATTER, "strata:reduce_scatter", inputs[0], outputs, opts.timeout,
             [&](StrataWork& w) {
               w.add(comm_.reduce_scatter(view(flat, "reduce_scatter"), out.buffer(), r.op));
               w.on_success([out, flat] { out.finish(); });
             });
}

WorkPtr ProcessGroupStrata::reduce_scatter_single(at::Tensor& output, at::Tensor& input,
                                                  const c10d::ReduceScatterOptions& opts) {
  const Reduction r = reduction(opts.reduceOp, input.scalar_type(), "reduce_scatter_tensor");
  Staged in(input, "reduce_scatter_tensor"), out(output, "reduce_scatter_tensor");
  const at::Tensor scaled = premultiplied(in.flat(), r);
  return run(
      OpType::_REDUCE_SCATTER_BASE, "strata:reduce_scatter_tensor", {input}, {output}, opts.timeout,
      [&](StrataWork& w) {
        w.add(comm_.reduce_scatter(view(scaled, "reduce_scatter_tensor"), out.buffer(), r.op));
        w.on_success([scaled, out] { out.finish(); });
      });
}

WorkPtr ProcessGroupStrata::reduce_scatter_single_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* op = "reduce_scatter_tensor_coalesced";
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "strata ", op, ": ", outputs.size(),
                    " outputs for ", inputs.size(), " inputs");
  std::vector<at::Tensor> scaled;
  std::vector<Staged> outs;
  std::vector<Reduction> rs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    rs.push_back(reduction(opts.reduceOp, inputs[i].scalar_type(), op));
    check_tensor(inputs[i], op);
    scaled.push_back(premultiplied(inputs[i].contiguous(), rs.back()));
    outs.emplace_back(outputs[i], op);
  }
  return run(OpType::REDUCE_SCATTER_TENSOR_COALESCED, "strata:reduce_scatter_tensor_coalesced",
             inputs, outputs, opts.timeout, [&](StrataWork& w) {
               for (size_t i = 0; i < outs.size(); ++i) {
                 w.add(comm_.reduce_scatter(view(scaled[i], op), outs[i].buffer(), rs[i].op));
               }
               w.on_success([scaled, outs] {
                 for (const auto& o : outs) o.finish();
               });
             });
}

WorkPtr ProcessGroupStrata::all_to_all_single(at::Tensor& output, at::Tensor& input,
                                              std::vector<int64_t>& output_splits,
                                              std::vector<int64_t>& input_splits,
                                              const c10d::AllToAllOptions& opts) {
  Staged in(input, "all_to_all_single"), out(output, "all_to_all_single");
  TORCH_CHECK_TYPE(input.scalar_type() == output.scalar_type(),
                   "strata all_to_all_single: ", "input of dtype ", input.scalar_type(),
                   ", output of ", output.scalar_type());
  const auto send = split_counts(in.flat(), input_splits, getSize(), "input");
  const auto recv = split_counts(out.flat(), output_splits, getSize(), "output");
  return run(OpType::ALLTOALL_BASE, "strata:all_to_all_single", {input}, {output}, opts.timeout,
             [&](StrataWork& w) {
               w.add(comm_.all_to_allv(in.buffer(), send, displacements(send), out.buffer(), recv,
                                       displacements(recv)));
               w.on_success([in, out] { out.finish(); });
             });
}

WorkPtr ProcessGroupStrata::alltoall(std::vector<at::Tensor>& outputs,
                                     std::vector<at::Tensor>& inputs,
                                     const c10d::AllToAllOptions& opts) {
  TORCH_CHECK_VALUE(int(outputs.size()) == getSize() && int(inputs.size()) == getSize(),
                    "strata all_to_all: needs ", getSize(), " input and output tensors, got ",
                    inputs.size(), " and ", outputs.size());
  check_same_dtype(inputs, inputs[0].scalar_type(), "all_to_all");
  check_same_dtype(outputs, inputs[0].scalar_type(), "all_to_all");
  std::vector<size_t> send, recv;
  for (const auto& t : inputs) send.push_back(size_t(t.numel()));
  for (const auto& t : outputs) recv.push_back(size_t(t.numel()));
  const at::Tensor in = flat_cat(inputs);
  at::Tensor flat =
      at::empty({int64_t(std::accumulate(recv.begin(), recv.end(), size_t{0}))}, in.options());
  return run(OpType::ALLTOALL, "strata:all_to_all", inputs, outputs, opts.timeout,
             [&](StrataWork& w) {
               w.add(comm_.all_to_allv(view(in, "all_to_all"), send, displacements(send),
                                       view(flat, "all_to_all"), recv, displacements(recv)));
               w.on_success([in, flat, outputs] { scatter_into(flat, outputs); });
             });
}

WorkPtr ProcessGroupStrata::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  TORCH_CHECK_VALUE(tag >= 0, "strata send: negative tag ", tag);
  const at::Tensor t = single(tensors, "send").contiguous();
  return run(OpType::SEND, "strata:send", tensors, {}, c10d::kUnsetTimeout, [&](StrataWork& w) {
    w.add(comm_.send(view(t, "send"), dst, uint32_t(tag)));
    w.on_success([t] {});
  });
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
  return run(type, title, tensors, tensors, c10d::kUnsetTimeout, [&](StrataWork& w) {
    w.add(comm_.recv(t.buffer(), src, uint32_t(tag)));
    w.on_success([t] { t.finish(); });
  });
}

WorkPtr ProcessGroupStrata::barrier(const c10d::BarrierOptions& opts) {
  return run(OpType::BARRIER, "strata:barrier", {}, {}, opts.timeout,
             [&](StrataWork& w) { w.add(comm_.barrier()); });
}

}  // namespace strata::torch_backend
