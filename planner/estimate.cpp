#include "estimate.hpp"

#include <algorithm>
#include <string>

#include "parallel/pipeline_schedule.hpp"
#include "strata/cost.hpp"
#include "strata/types.hpp"
#include "validate/layout_formulas.hpp"

namespace plan {
namespace {

double element_bytes(Precision p) { return p == Precision::fp32 ? 4 : 2; }

// Sequences per micro-batch on one data rank.
double micro_batch(const gpt::TrainOptions& o, int ranks) {
  return double(o.global_batch) / gpt::data_ranks(o, ranks) / o.micro_batches;
}

// Activation bytes one block keeps for one micro-batch, in 2-byte units as Korthikanti et al.
// (2022) count them: attention 11 sbh + 5 a s^2 b, MLP 19 sbh, LayerNorms 4 sbh; with tp
// and without sp 10 sbh stay whole and the rest splits; with sp all splits. A MoE block keeps
// its MLP's for each of the k experts a token visits. Under cp (ring attention) no block keeps
// the scores: only their running statistics.
double block_bytes(const gpt::TrainOptions& o, double b, bool moe) {
  const gpt::Config& c = o.model;
  const double t = o.tp, s = double(c.ctx) / o.cp, h = c.embd, sbh = s * b * h;
  const double scores = o.cp > 1 ? 0 : 5.0 * c.heads * s * s * b;
  const double extra = moe ? 19 * sbh * (c.top_k - 1) : 0;
  if (o.tp == 1) return 34 * sbh + extra + scores;
  if (o.sp) return (34 * sbh + extra + scores) / t;
  return 10 * sbh + (24 * sbh + extra + scores) / t;
}

// Pairs (micro-batch, chunk) whose activations stage `stage` holds at its peak
// (docs/trainer.md, "Pipeline parallelism").
int held(const gpt::TrainOptions& o, int stage) {
  const int P = o.pp, M = o.micro_batches, V = o.virtual_stages;
  switch (o.schedule) {
    case gpt::pp::Schedule::gpipe:
      return M;
    case gpt::pp::Schedule::interleaved:
      return std::min(2 * (P - stage - 1) + (V - 1) * P + 1, V * M);
    default:
      return std::min(P - stage, M);
  }
}

double activations(const gpt::TrainOptions& o, int ranks, int stage, Precision p) {
  const gpt::Config& c = o.model;
  const double b = micro_batch(o, ranks), scale = element_bytes(p) / 2;
  const double rows = double(c.ctx) / o.cp * b * c.embd / (o.sp ? o.tp : 1);
  const int stages = o.pp * o.virtual_stages;
  double kept = 0, largest = 0;  // per (micro-batch, chunk), summed over this stage's chunks
  int chunks = 0;
  bool head = false;
  for (int v = 0; v < o.virtual_stages; ++v) {
    const int s = v * o.pp + stage;
    const auto [first, last] = gpt::pp::stage_layers(c.layers, stages, s);
    for (int l = first; l < last; ++l) {
      const double whole = block_bytes(o, b, c.moe_block(l));
      kept += o.recompute ? 2 * rows : whole;  // recompute keeps each block's input
      largest = std::max(largest, whole);
    }
    head |= s == stages - 1;
    ++chunks;
  }
  // Held pairs of one chunk each: the stage's chunks share them alike.
  double bytes = kept / chunks * held(o, stage);
  if (o.recompute) bytes += largest;  // the one block being recomputed
  // The head's logits and probabilities, fp32 for the loss, for the micro-batch in flight.
  if (head) bytes += 2 * 4.0 * double(c.ctx) / o.cp * b * c.vocab / o.tp / scale;
  return bytes * scale;
}

// Communication buffers: the gradient buckets in flight (two), or ZeRO-3's gathered units
// (prefetch + 1 of the largest unit), and the pipeline's send and receive copies.
double buffers(const gpt::TrainOptions& o, int ranks, const gpt::Memory& m, Precision p) {
  const double e = element_bytes(p), units = std::max(1.0, double(o.model.layers) / o.pp);
  double bytes =
      o.stage < 3 ? 2.0 * double(o.bucket_bytes) : (o.prefetch + 1) * double(m.params) / units * e;
  if (o.pp > 1) {
    const double rows = double(o.model.ctx) / o.cp * micro_batch(o, ranks) * o.model.embd;
    bytes += 2 * rows * e / (o.sp ? o.tp : 1);
  }
  return bytes;
}

// How many nodes a group of `size` ranks spans when its consecutive members are `stride` world
// ranks apart (Megatron's order tp-cp-ep-dp-pp, the mesh's).
int nodes_spanned(int size, int stride, int per_node) {
  if (stride >= per_node) return size;
  const int per = std::max(1, per_node / stride);
  return (size + per - 1) / per;
}

// Whether some rank of pipeline stage `from` sits on another node than its peer of stage `to`
// (stages are `stride` world ranks apart: pp is the mesh's outermost axis).
bool stages_apart(int from, int to, int stride, int per_node) {
  if (stride >= per_node) return true;
  for (int i = 0; i < stride; ++i) {
    if ((from * stride + i) / per_node != (to * stride + i) / per_node) return true;
  }
  return false;
}

strata::GroupShape shape(const ClusterSpec& c, int size, int stride) {
  strata::GroupShape g;
  g.ranks = size;
  g.nodes = std::min(size, nodes_spanned(size, stride, c.per_node));
  g.intra = c.intra, g.inter = c.inter;
  g.shared_memory = c.host;
  return g;
}

// Seconds of `collective` over `bytes` per rank (as strata::estimate_cost counts them). On host
// memory, the library's own choice and cost; on GPUs, NCCL's ring: (n-1) steps each way of B/n,
// the reduction inside the copy, at the slowest link the ring crosses (a node's NVLink, or across
// nodes each GPU's own NIC, NCCL's rails).
double cost(bool host, const char* collective, const strata::GroupShape& g, double bytes) {
  if (g.ranks < 2 || bytes <= 0) return 0;
  if (host) return strata::estimate_cost(collective, g, size_t(bytes)).seconds;
  const strata::Link& l = g.nodes > 1 ? g.inter : g.intra;
  const double n = g.ranks, steps = std::string(collective) == "all_reduce" ? 2 * (n - 1) : n - 1;
  return steps * (l.latency_us * 1e-6 + bytes / n / (l.bandwidth_gbs * 1e9));
}

}  // namespace

Memory model_state(double params, Precision p, int zero, int dp) {
  // fp32: weights 4, gradients 4, Adam's two moments 8. Mixed: 2-byte weights and gradients,
  // fp32 master weights and both moments, 12. ZeRO shards the optimizer state (1), the
  // gradients (2) and the weights (3) over dp.
  const bool fp32 = p == Precision::fp32;
  Memory r;
  r.params = (fp32 ? 4 : 2) * (zero < 3 ? params : params / dp);
  r.grads = (fp32 ? 4 : 2) * (zero < 2 ? params : params / dp);
  r.optimizer = (fp32 ? 8 : 12) * (zero == 0 ? params : params / dp);
  return r;
}

Memory memory_of(const gpt::TrainOptions& o, int ranks, int stage, Precision p) {
  const gpt::Memory m = gpt::memory_formula(o, ranks, stage);
  Memory r;
  if (p == Precision::fp32) {  // the trainer's own figures, to the byte
    r.params = double(m.param_bytes), r.grads = double(m.grad_bytes);
    r.optimizer = double(m.optimizer_bytes);
  } else {
    r = model_state(double(m.params), p, o.stage, ranks / (o.tp * o.ep * o.pp));
  }
  r.activations = activations(o, ranks, stage, p);
  r.buffers = buffers(o, ranks, m, p);
  return r;
}

Bytes traffic_of(const gpt::TrainOptions& o, int ranks, int stage, Precision p) {
  const gpt::Traffic f = gpt::traffic_formula(o, ranks, stage);
  Bytes b{f.tp_bus_bytes,        f.pp_bytes,     f.dp_bus_bytes,
          f.dp_gather_bus_bytes, f.ep_bus_bytes, f.cp_bytes};
  const double scale = element_bytes(p) / 4;  // the formula counts fp32
  for (double* x : {&b.tp, &b.pp, &b.dp, &b.dp_gather, &b.ep, &b.cp}) *x *= scale;
  return b;
}

double step_flops(const gpt::TrainOptions& o, Precision) {
  // Per token, forward: a block 24 h^2 (qkv 6, projection 2, MLP 16; a MoE block's MLP k
  // times, plus its router 2 h E) and 4 s h of attention; the head 2 h V. Backward twice the
  // forward; recompute one more forward of the blocks (Narayanan et al. 2021: 72 B s L h^2 (1 +
  // s / 6h + V / 12 h L) without recompute).
  const gpt::Config& c = o.model;
  const double h = c.embd, s = c.ctx;
  double blocks = 0;
  for (int l = 0; l < c.layers; ++l) {
    blocks += 8 * h * h + 4 * s * h +
              (c.moe_block(l) ? 16 * h * h * c.top_k + 2 * h * c.experts : 16 * h * h);
  }
  const double forward = blocks + 2 * h * c.vocab;
  return double(o.global_batch) * s * (3 * forward + (o.recompute ? blocks : 0));
}

Estimate estimate(const gpt::TrainOptions& o, const ClusterSpec& c, Precision p) {
  const int ranks = c.devices();
  Estimate r;
  for (int stage : {0, o.pp - 1}) {
    const Memory m = memory_of(o, ranks, stage, p);
    if (stage == 0 || m.total() > r.memory.total()) r.memory = m, r.stage = stage;
  }
  r.bytes = traffic_of(o, ranks, 0, p);
  const gpt::Config& mc = o.model;
  const double e = element_bytes(p), m = o.micro_batches, b = micro_batch(o, ranks);
  const double rows = double(mc.ctx) / o.cp * b;  // this rank's positions of a micro-batch
  // Smaller micro-batches multiply smaller matrices, which run slower.
  const double work = step_flops(o, p) / ranks / (c.flops * rows / (rows + c.rows_half)) *
                      (o.cp > 1 ? 1 + c.cp_extra : 1);
  Time& t = r.time;
  t.compute = work;
  const int per_stage = (mc.layers + o.pp - 1) / o.pp;
  int moe_per_stage = 0;
  for (int l = 0; l < per_stage; ++l) moe_per_stage += mc.moe_block(l);
  const double passes = o.recompute ? 3 : 2;  // forward (again) and backward per micro-batch
  // Blocking exchanges per step, each waiting for its slowest peer beyond the link: tp's
  // collectives, ep's all-to-alls, cp's ring steps (or all-to-alls), the pipeline's exposed
  // messages. A peer is late by its own computation between two exchanges at most, so the
  // waits of a step add up to no more than a share of its computation.
  const double tp_calls = o.tp > 1 ? per_stage * m * passes * (o.sp ? 4 : 2) : 0;
  const double ep_calls = o.ep > 1 ? moe_per_stage * m * passes * 2 : 0;
  const double cp_calls =
      o.cp > 1 ? per_stage * m * passes * (o.cp_comm == gpt::CpComm::p2p ? o.cp - 1 : 2) : 0;
  const double pp_calls = 2.0 * (o.pp - 1), calls = tp_calls + ep_calls + cp_calls + pp_calls;
  const double shared = c.cores > 0 ? double(c.per_node) / c.cores : 1.0;  // ranks a core
  const double wait =
      calls > 0 ? std::min(c.wait_us * 1e-6, c.wait_share * work * shared / calls) : 0;

  // TP: per block and micro-batch two all-reduces of the rows each way (or two all-gathers and
  // two reduce-scatters under sp), blocking.
  const strata::GroupShape tp = shape(c, o.tp, 1);
  const double act = rows * mc.embd * e;
  const double tp_pair =
      o.sp ? cost(c.host, "all_gather", tp, act) + cost(c.host, "reduce_scatter", tp, act)
           : 2 * cost(c.host, "all_reduce", tp, act);
  t.tp.comm = t.tp.exposed = per_stage * m * passes * tp_pair + tp_calls * wait;
  // EP: per MoE block and micro-batch a dispatch and a combine each way, blocking; each tp rank
  // routes its share of the sequences.
  const strata::GroupShape ep = shape(c, o.ep, o.tp * o.cp);
  const double routed = rows / o.tp * mc.top_k * mc.embd * e;
  t.ep.comm = t.ep.exposed =
      moe_per_stage * m * passes * 2 * cost(c.host, "all_to_all", ep, routed) + ep_calls * wait;
  // CP: the ring's keys and values (its bytes above) behind each block's attention, or
  // Ulysses' all-to-alls, blocking.
  if (o.cp > 1) {
    const strata::GroupShape cp = shape(c, o.cp, o.tp);
    const strata::Link& link = cp.nodes > 1 ? c.inter : c.intra;
    t.cp.comm = r.bytes.cp / (link.bandwidth_gbs * 1e9) + cp_calls * link.latency_us * 1e-6;
    const double attention = work * (4 * mc.ctx) / (24.0 * mc.embd + 4 * mc.ctx);
    // The ring's transfers hide behind the attention; its waits for the peer do not.
    t.cp.exposed =
        (o.cp_comm == gpt::CpComm::p2p ? std::max(0.0, t.cp.comm - attention) : t.cp.comm) +
        cp_calls * wait;
    t.cp.comm += cp_calls * wait;
  }
  // The pipeline: each stage's work, bubbles of (P-1)/(V M) of it; each activation forward and
  // gradient backward a message, of which the fill and the drain wait.
  const double stage_work = t.compute + t.tp.exposed + t.ep.exposed + t.cp.exposed;
  t.bubble = stage_work * (o.pp - 1) / (o.virtual_stages * m);
  if (o.pp > 1) {
    // Each boundary's message on its own link: the fill and the drain wait for every boundary's
    // in turn; a rank's steady state sends over the slowest (interleaving adds the wrap from the
    // last stage to the first).
    const int stride = ranks / o.pp;
    auto send = [&](int from, int to) {
      const strata::Link& l = stages_apart(from, to, stride, c.per_node) ? c.inter : c.intra;
      return l.latency_us * 1e-6 + act / (o.sp ? o.tp : 1) / (l.bandwidth_gbs * 1e9);
    };
    double fill = 0, slowest = o.virtual_stages > 1 ? send(o.pp - 1, 0) : 0;
    for (int b = 0; b + 1 < o.pp; ++b) {
      const double one = send(b, b + 1);
      fill += one, slowest = std::max(slowest, one);
    }
    t.pp.comm = 2 * m * o.virtual_stages * slowest + pp_calls * wait;
    t.pp.exposed = 2 * fill + pp_calls * wait;
  }
  // DP (over cp x dp, as the engine): gradients reduced behind the last micro-batch's backward
  // (ZeRO 0-2), parameters gathered behind the next step's first forward (1-2). ZeRO-3 holds no
  // whole unit between passes: the passes gather each unit again as they read it, behind the
  // computation with prefetch, as often as the trainer's formula counts (about twice a
  // micro-batch); the last micro-batch's backward reduce-scatters the accumulated gradients.
  // Under ep the dense gradients' average joins it.
  const int dp = ranks / (o.tp * o.ep * o.pp);
  const strata::GroupShape g = shape(c, dp, o.tp);
  const gpt::Memory mem = gpt::memory_formula(o, ranks, r.stage);
  const double grads = double(mem.params) * e;
  const double reduce = o.stage <= 1 ? cost(c.host, "all_reduce", g, grads)
                                     : cost(c.host, "reduce_scatter", g, grads);
  const double gather = o.stage >= 1 ? cost(c.host, "all_gather", g, grads) : 0;
  // Whole gathers of the rank's parameters a step: one in ZeRO 1-2; in ZeRO-3 the formula's
  // gathered bytes over one whole gather's.
  double gathers = o.stage >= 1 ? 1 : 0;
  if (o.stage == 3 && dp > 1) {
    const double gathered =
        r.stage == 0 ? r.bytes.dp_gather : traffic_of(o, ranks, r.stage, p).dp_gather;
    gathers = gathered / strata::gather_bus_bytes(grads, dp);
  }
  const double average =
      cost(c.host, "all_reduce", shape(c, o.ep, o.tp * o.cp), double(mem.dense) * e);
  t.dp.comm = reduce + gathers * gather + average;
  const double backward = stage_work * 2 / 3 / m, forward = stage_work / 3 / m;
  if (o.stage < 3) {
    t.dp.exposed = std::max(0.0, reduce + average - backward) + std::max(0.0, gather - forward);
  } else {
    t.dp.exposed = std::max(0.0, t.dp.comm - stage_work) + gather / per_stage;  // the first unit
  }
  // Ranks sharing cores: a node's computation takes its cores `shared` times a rank's, but a
  // stage idle in the pipeline's bubble leaves its core to the others, so computation and bubble
  // take the longer of the two. (A rank waiting in an exchange polls: it keeps its core.) On
  // shared cores the data-parallel transfers across nodes, though hidden, cost core time too.
  const double hidden = shared > 1 && g.nodes > 1 ? c.overlap_s_per_gb * r.bytes.dp / 1e9 : 0;
  t.compute = std::max(work + hidden, (work + hidden) * shared - t.bubble);
  return r;
}

}  // namespace plan
