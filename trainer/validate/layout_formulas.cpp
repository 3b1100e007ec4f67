#include "validate/layout_formulas.hpp"

#include <algorithm>
#include <vector>

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

// One engine unit of a rank: the model's unit it holds (0 the embeddings, 1 + l block l, L + 1
// the head's LayerNorm; kWteCopy the last stage's copy of the tied wte), its parameters padded
// to a multiple of dp as the engine pads each unit, and of those the ones replicated over ep,
// unpadded.
constexpr int kWteCopy = -1;
struct Unit {
  int model_unit;
  size_t params, dense;
};

// The units of the rank at pipeline stage `stage`, in the engine's order (the trainer's
// local_specs): the wte copy first, then each chunk's embeddings, blocks and head.
std::vector<Unit> units_of(const TrainOptions& o, int ranks, int stage) {
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
  auto unit = [&](int g, size_t n, size_t dense) { return Unit{g, (n + dp - 1) / dp * dp, dense}; };
  std::vector<Unit> r;
  bool head_here = false, embed_here = false;
  for_each_chunk(o, stage,
                 [&](int, int, bool embed, bool head) { head_here |= head, embed_here |= embed; });
  if (head_here && !embed_here) r.push_back(unit(kWteCopy, wte, wte));
  for_each_chunk(o, stage, [&](int first, int last, bool embed, bool head) {
    if (embed) r.push_back(unit(0, wte + T * C, wte + T * C));
    for (int l = first; l < last; ++l) {
      const bool moe = c.moe_block(l);
      r.push_back(unit(1 + l, moe ? moe_dense + moe_experts : block, moe ? moe_dense : block));
    }
    if (head) r.push_back(unit(c.layers + 1, 2 * C, 2 * C));
  });
  return r;
}

// A rank's parameters and their bytes under ZeRO stage `zero` over `dp` ranks, from its units;
// AdamW keeps two moments a parameter, SGD none.
Memory memory_of_units(const std::vector<Unit>& units, int zero, size_t dp,
                       strata::UpdateRule rule) {
  Memory r;
  for (const Unit& u : units) r.params += u.params, r.dense += u.dense;
  const size_t P = r.params;
  r.param_bytes = 4 * (zero < 3 ? P : P / dp);
  r.grad_bytes = 4 * (zero < 2 ? P : P / dp);
  const size_t moments = rule == strata::UpdateRule::adamw ? 2 : 0;
  r.optimizer_bytes = 4 * moments * (zero == 0 ? P : P / dp);
  return r;
}

// ZeRO-3's parameter gathers in a steady step, bus bytes: the passes of this rank in the
// schedule's order, each reading its units as train_step.cpp does, and a unit gathered wherever
// a pass reads it while the engine holds no copy. The engine (src/sharding/unit_gatherer.hpp)
// frees a unit once read, except that a forward keeps the rank's last unit, and a unit that a
// backward starts with at its last read in that forward (the tied wte); the next forward frees
// what was kept. The trainer keeps no unit resident.
double zero3_gather_bus_bytes(const TrainOptions& o, const std::vector<Unit>& units, int dp,
                              int stage) {
  const int L = o.model.layers;
  std::vector<int> engine_unit(size_t(L) + 2, -1);
  int wte = -1;
  for (size_t u = 0; u < units.size(); ++u) {
    if (units[u].model_unit == kWteCopy)
      wte = int(u);
    else
      engine_unit[size_t(units[u].model_unit)] = int(u);
  }
  if (wte < 0) wte = engine_unit[0];
  std::vector<std::vector<int>> forward_reads, backward_reads;  // per chunk
  for_each_chunk(o, stage, [&](int first, int last, bool embed, bool head) {
    std::vector<int> f, b;
    if (embed) f.push_back(engine_unit[0]);  // embed_backward reads no parameters
    if (head) b = {wte, engine_unit[size_t(L) + 1]};
    for (int l = first; l < last; ++l) f.push_back(engine_unit[size_t(1 + l)]);
    for (int l = last - 1; l >= first; --l) b.push_back(engine_unit[size_t(1 + l)]);
    if (head) f.insert(f.end(), {wte, engine_unit[size_t(L) + 1]});
    forward_reads.push_back(std::move(f));
    backward_reads.push_back(std::move(b));
  });
  // One pass from nothing held: a forward frees each unit once read, but keeps the rank's last
  // unit and, at its last read there, a unit that a backward starts with; a backward frees all.
  std::vector<bool> starts_backward(units.size());
  for (const std::vector<int>& b : backward_reads) starts_backward[size_t(b.front())] = true;
  auto bytes_of = [&](int u) {
    return strata::gather_bus_bytes(4.0 * double(units[size_t(u)].params), dp);
  };
  struct Pass {
    double bytes = 0;         // gathered when it starts with nothing held
    std::vector<int> kept;    // held at its end
    std::vector<bool> reads;  // by unit
  };
  std::vector<Pass> forward(forward_reads.size()), backward(backward_reads.size());
  for (size_t c = 0; c < forward_reads.size(); ++c) {
    const std::vector<int>& f = forward_reads[c];
    std::vector<bool> held(units.size());
    for (auto r = f.begin(); r != f.end(); ++r) {
      const size_t u = size_t(*r);
      if (!held[u]) forward[c].bytes += bytes_of(*r);
      const bool last_read = std::find(r + 1, f.end(), *r) == f.end();
      held[u] = u + 1 == units.size() || (last_read && starts_backward[u]);
    }
    for (size_t u = 0; u < units.size(); ++u)
      if (held[u]) forward[c].kept.push_back(int(u));
    backward[c].reads.assign(units.size(), false);
    for (int u : backward_reads[c])
      backward[c].bytes += bytes_of(u), backward[c].reads[size_t(u)] = true;
  }
  // The step: a backward finds what the forwards before it kept (the next forward frees it)
  // and frees what it reads.
  std::vector<int> held;
  double bytes = 0;
  for (const pp::Action& a :
       pp::schedule(o.schedule, o.pp, stage, o.micro_batches, o.virtual_stages)) {
    if (a.kind == pp::Action::forward) {
      bytes += forward[size_t(a.chunk)].bytes;
      held = forward[size_t(a.chunk)].kept;
      continue;
    }
    const Pass& b = backward[size_t(a.chunk)];
    bytes += b.bytes;
    std::erase_if(held, [&](int u) {
      if (!b.reads[size_t(u)]) return false;
      bytes -= bytes_of(u);
      return true;
    });
  }
  return bytes;
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
  // all-gathers every parameter, in stage 3 each unit as the passes read it; clipping adds one
  // double summed over dp and over tp x pp.
  const int dp = ranks / (o.tp * o.ep * o.pp), mp = o.tp * o.ep * o.pp;
  const std::vector<Unit> units = units_of(o, ranks, stage);
  const Memory mem = memory_of_units(units, o.stage, size_t(dp), o.rule);
  const double P = 4.0 * double(mem.params);
  r.dp_gather_bus_bytes = o.stage == 1 || o.stage == 2 ? strata::gather_bus_bytes(P, dp)
                          : o.stage == 3               ? zero3_gather_bus_bytes(o, units, dp, stage)
                                                       : 0.0;
  r.dp_bus_bytes =
      (o.stage <= 1 ? strata::all_reduce_bus_bytes(P, dp) : strata::gather_bus_bytes(P, dp)) +
      r.dp_gather_bus_bytes;
  if (o.max_grad_norm > 0) {
    if (o.stage > 0) r.dp_bus_bytes += strata::all_reduce_bus_bytes(8, dp);
    r.dp_bus_bytes += strata::all_reduce_bus_bytes(8, mp);
  }
  // EP: the dense gradients averaged over ep once a step, unpadded.
  if (o.ep > 1) r.ep_bus_bytes = strata::all_reduce_bus_bytes(4.0 * double(mem.dense), o.ep);
  return r;
}

Memory memory_formula(const TrainOptions& o, int ranks, int stage) {
  const size_t dp = size_t(ranks) / size_t(o.tp * o.ep * o.pp);
  return memory_of_units(units_of(o, ranks, stage), o.stage, dp, o.rule);
}

}  // namespace gpt
