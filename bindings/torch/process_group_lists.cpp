// The backend's gathers, scatters, reduce-scatters and all-to-alls: torch's list and "single"
// forms over one Strata collective each (tensor_lists.hpp stages the lists).
#include <c10/util/Exception.h>

#include "process_group.hpp"
#include "strata/error.hpp"
#include "tensor_lists.hpp"
#include "tensors.hpp"

namespace strata::torch_backend {

namespace {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

}  // namespace

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
             [&](StrataWork& w, Communicator& c) {
               w.add(c.all_gather(in.buffer(), view(flat, "all_gather")));
               w.on_success([in, flat, outs] { scatter_into(flat, outs); });
             });
}

WorkPtr ProcessGroupStrata::all_gather_single(at::Tensor& output, at::Tensor& input,
                                              const c10d::AllgatherOptions& opts) {
  Staged in(input, "all_gather_into_tensor"), out(output, "all_gather_into_tensor");
  return run(OpType::_ALLGATHER_BASE, "strata:all_gather_into_tensor", {input}, {output},
             opts.timeout, [&](StrataWork& w, Communicator& c) {
               w.add(c.all_gather(in.buffer(), out.buffer()));
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
  return run(
      OpType::ALLGATHER_COALESCED, "strata:all_gather_coalesced", inputs, outs, opts.timeout,
      [&](StrataWork& w, Communicator& c) {
        w.add(c.all_gather(view(in, "all_gather_coalesced"), view(flat, "all_gather_coalesced")));
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
             inputs, outputs, opts.timeout, [&](StrataWork& w, Communicator& c) {
               for (size_t i = 0; i < ins.size(); ++i) {
                 w.add(c.all_gather(ins[i].buffer(), outs[i].buffer()));
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
    root_checks("gather", in.buffer(), [&] {
      TORCH_CHECK_VALUE(outputs.size() == 1 && int(outputs[0].size()) == getSize(),
                        "strata gather: the root needs one list of ", getSize(), " output tensors");
      check_blocks(outputs[0], in.flat(), "gather", "output", "an input");
    });
    outs = outputs[0];
    flat = at::empty({in.flat().numel() * getSize()}, in.flat().options());
  } else {
    TORCH_CHECK_VALUE(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                      "strata gather: only the root (rank ", opts.rootRank, ") takes outputs");
  }
  return run(
      OpType::GATHER, "strata:gather", inputs, outs, opts.timeout,
      [&](StrataWork& w, Communicator& c) {
        w.add(c.gather(in.buffer(), root ? view(flat, "gather") : Buffer{}, int(opts.rootRank)));
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
             [&](StrataWork& w, Communicator& c) {
               w.add(c.gather(in.buffer(), out ? out->buffer() : Buffer{}, int(opts.rootRank)));
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
    root_checks("scatter", out.buffer(), [&] {
      TORCH_CHECK_VALUE(inputs.size() == 1 && int(inputs[0].size()) == getSize(),
                        "strata scatter: the root needs one list of ", getSize(), " input tensors");
      check_blocks(inputs[0], out.flat(), "scatter", "input", "an output");
    });
    flat = flat_cat(inputs[0]);
  } else {
    TORCH_CHECK_VALUE(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                      "strata scatter: only the root (rank ", opts.rootRank, ") takes inputs");
  }
  return run(
      OpType::SCATTER, "strata:scatter", root ? inputs[0] : std::vector<at::Tensor>{}, outputs,
      opts.timeout, [&](StrataWork& w, Communicator& c) {
        w.add(c.scatter(root ? view(flat, "scatter") : Buffer{}, out.buffer(), int(opts.rootRank)));
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
             [&](StrataWork& w, Communicator& c) {
               w.add(c.reduce_scatter(view(flat, "reduce_scatter"), out.buffer(), r.op));
               w.on_success([out, flat] { out.finish(); });
             });
}

WorkPtr ProcessGroupStrata::reduce_scatter_single(at::Tensor& output, at::Tensor& input,
                                                  const c10d::ReduceScatterOptions& opts) {
  const Reduction r = reduction(opts.reduceOp, input.scalar_type(), "reduce_scatter_tensor");
  Staged in(input, "reduce_scatter_tensor"), out(output, "reduce_scatter_tensor");
  const at::Tensor scaled = premultiplied(in.flat(), r);
  return run(OpType::_REDUCE_SCATTER_BASE, "strata:reduce_scatter_tensor", {input}, {output},
             opts.timeout, [&](StrataWork& w, Communicator& c) {
               w.add(c.reduce_scatter(view(scaled, "reduce_scatter_tensor"), out.buffer(), r.op));
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
             inputs, outputs, opts.timeout, [&](StrataWork& w, Communicator& c) {
               for (size_t i = 0; i < outs.size(); ++i) {
                 w.add(c.reduce_scatter(view(scaled[i], op), outs[i].buffer(), rs[i].op));
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
             [&](StrataWork& w, Communicator& c) {
               w.add(c.all_to_allv(in.buffer(), send, displacements(send), out.buffer(), recv,
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
             [&](StrataWork& w, Communicator& c) {
               w.add(c.all_to_allv(view(in, "all_to_all"), send, displacements(send),
                                   view(flat, "all_to_all"), recv, displacements(recv)));
               w.on_success([in, flat, outputs] { scatter_into(flat, outputs); });
             });
}

}  // namespace strata::torch_backend
