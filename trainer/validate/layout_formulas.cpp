#include "validate/layout_formulas.hpp"

#include "parallel/pipeline_schedule.hpp"
#include "parallel/tensor_parallel.hpp"
#include "strata/types.hpp"

namespace gpt {

namespace {

// The model chunks of pipeline stage `stage`: their layer ranges.
template <typename F>
void for_each_chunk(const TrainOptions& o, int stage, F f) {
  const int stages = o.pp * o.virtual_stages;
  for (int c = 0; c < o.virtual_stages; ++c) {
    const auto [first, last] = pp::stage_layers(o.model.layers, stages, c * o.pp + stage);
    f(first, last, c * o.pp + stage == 0, c * o.pp + stage == stages - 1);
  }
}

}  // namespace

Traffic traffic_formula(const TrainOptions& o, int ranks, int stage) {
  const Config& c = o.model;
  const double t = o.tp, m = o.micro_batches;
  const double B = double(o.global_batch) / data_ranks(o, ranks) / m;
  const double N = B * c.ctx / o.cp, S = 4.0 * N * c.embd;  // one activation of its rows, bytes
  const double ar = 2 * (t - 1) / t, half = (t - 1) / t;    // bus factors: all-reduce, AG or RS
  Traffic r;
  const double rc = o.recompute ? 1 : 0;
  for_each_chunk(o, stage, [&](int first, int last, bool embed, bool head) {
    const double blocks = last - first;
    double moe = 0;  // mixture-of-experts blocks
    for (int l = first; l < last; ++l) moe += c.moe_block(l);
    if (o.tp > 1) {
      // Per micro-batch: f and g at each region edge (docs/trainer.md, "Tensor parallelism").
      // A MoE block: its attention's, and its experts' outputs and input gradients gathered
      // from every tp rank's share of the sequences (under sp as many gathers as a dense MLP's).
      double per = 0;
      if (!o.sp) {
        per += (embed ? ar * S : 0) + (blocks - moe) * (4 + 2 * rc) * ar * S +
               moe * (2 + rc) * (ar + half) * S;
        if (head) per += ar * S;
      } else {
        per += (embed ? 2 * half * S : 0) + blocks * (10 + (o.recompute ? 4 : 0)) * half * S;
        if (head) per += 3 * half * S;
        // Once per step: the LayerNorm gradients summed over tp.
        r.tp_bus_bytes += (blocks * 4 + (head ? 2 : 0)) * ar * 4.0 * c.embd;
      }
      if (head) per += ar * (4.0 * N + 16.0 * N);  // the cross-entropy's max and sums
      r.tp_bus_bytes += m * per;
      // Once per step: the MoE blocks' router and experts, each rank's sequences', summed.
      const double E = c.experts, El = E / o.ep, C = c.embd;
      r.tp_bus_bytes += moe * ar * 4.0 * (E * C + El * (8 * C * C + 5 * C));
    }
    // Each boundary: the activation forward, its gradient backward (this rank's rows).
    const double rows_bytes = o.sp ? S / t : S;
    r.pp_bytes += m * ((head ? 0 : rows_bytes) + (embed ? 0 : rows_bytes));
    // CP, per block and micro-batch, of this rank's N rows' q, k, v (Cl = C / tp wide each).
    // Ring: its keys and values to the next rank at cp - 1 of the cp steps, forward and again
    // backward (and in recompute's forward), and their gradients at every step. All-to-all:
    // (cp - 1) / cp of q, k, v and of the output, forward, and of their gradients, backward.
    if (o.cp > 1) {
      const double P = o.cp, kv = 4.0 * N * 2 * c.embd / t;
      const double per = o.cp_comm == CpComm::p2p
                             ? kv * ((P - 1) * (2 + rc) + P)
                             : 4.0 * N * 4 * c.embd / t * (P - 1) / P * (2 + rc);
      r.cp_bytes += m * blocks * per;
    }
  });
  // DP: the engine reduces every (padded) parameter's gradient once a step and, in stages 1-2,
  // all-gathers every parameter; clipping adds one double summed over dp and over tp x pp.
  const int dp = ranks / (o.tp * o.ep * o.pp), mp = o.tp * o.ep * o.pp;
  const Memory mem = memory_formula(o, ranks, stage);
  const double P = 4.0 * double(mem.params);
  r.dp_bus_bytes =
      (o.stage <= 1 ? strata::all_reduce_bus_bytes(P, dp) : strata::gather_bus_bytes(P, dp)) +
      (o.stage == 1 || o.stage == 2 ? strata::gather_bus_bytes(P, dp) : 0.0);
  if (o.max_grad_norm > 0) {
    if (o.stage > 0) r.dp_bus_bytes += strata::all_reduce_bus_bytes(8, dp);
    r.dp_bus_bytes += strata::all_reduce_bus_bytes(8, mp);
  }
  r.dp_known = o.stage < 3;
  // EP: the dense gradients averaged over ep once a step, unpadded.
  if (o.ep > 1) r.ep_bus_bytes = strata::all_reduce_bus_bytes(4.0 * double(mem.dense), o.ep);
  return r;
}

Memory memory_formula(const TrainOptions& o, int ranks, int stage) {
  const Config& c = o.model;
  const size_t t = size_t(o.tp), C = size_t(c.embd), T = size_t(c.ctx);
  const size_t dp = size_t(ranks) / (t * size_t(o.ep) * size_t(o.pp));
  const size_t wte = size_t(padded_vocab(c.vocab, o.tp)) / t * C;
  // A block: LayerNorms and row-parallel biases whole, the four matrices and two column-parallel
  // biases split over tp.
  const size_t block =
      4 * C + 2 * C + (3 * C * C + 3 * C + C * C + 4 * C * C + 4 * C + 4 * C * C) / t;
  // A mixture-of-experts block: the attention as above and the router [E, C], dense; E / ep
  // experts of the MLP's 8C^2 + 5C, whole over tp.
  const size_t E = size_t(c.experts), El = E / size_t(o.ep);
  const size_t moe_dense = 4 * C + C + (3 * C * C + 3 * C + C * C) / t + E * C;
  const size_t moe_experts = El * (8 * C * C + 5 * C);
  auto padded = [&](size_t n) { return (n + dp - 1) / dp * dp; };
  Memory r;
  bool head_here = false, embed_here = false;
  for_each_chunk(o, stage, [&](int first, int last, bool embed, bool head) {
    if (embed) r.params += padded(wte + T * C), r.dense += wte + T * C;
    for (int l = first; l < last; ++l) {
      r.params += padded(c.moe_block(l) ? moe_dense + moe_experts : block);
      r.dense += c.moe_block(l) ? moe_dense : block;
    }
    if (head) r.params += padded(2 * C), r.dense += 2 * C;
    head_here |= head, embed_here |= embed;
  });
  if (head_here && !embed_here) r.params += padded(wte), r.dense += wte;  // the tied copy
  const size_t P = r.params;
  r.param_bytes = 4 * (o.stage < 3 ? P : P / dp);
  r.grad_bytes = 4 * (o.stage < 2 ? P : P / dp);
  r.optimizer_bytes = 8 * (o.stage == 0 ? P : P / dp);
  return r;
}

}  // namespace gpt
