// One optimizer step through the pipeline schedule: for each action of this rank, a micro-batch's
// forward or backward through one model chunk (receiving before it, sending after it), the units'
// gradients marked ready in their last backward so buckets launch while backward goes on, then
// the engine's step; the instruments (bubble, traffic) gathered per stage.
#include <algorithm>
#include <chrono>

#include "parallel/planted_fault.hpp"
#include "train/trainer_impl.hpp"

namespace gpt {

// Marks global unit g's gradients final: under sequence parallelism the LayerNorms' (replicated,
// computed on this rank's rows only) are first summed over the tp group, and so are a
// mixture-of-experts block's router and experts (replicated, computed on this rank's sequences).
// The tied wte waits for its reduction across the pipeline (launch_tied_reduction). Under expert
// parallelism the experts' gradients (every ep rank's tokens, summed) are scaled by 1 / ep, and the
// dense ones are averaged over ep in the background, ready when the next unit is
// (finish_dense_average).
void Trainer::Impl::ready_unit(int g) {
  finish_dense_average();
  const auto& lay = engine.layout();
  const size_t u = size_t(unit_of[size_t(g)]);
  std::vector<std::span<float>> dense;
  for (size_t t = lay.unit_first_tensor(u); t < lay.unit_last_tensor(u); ++t) {
    const std::string& name = lay.tensors()[t].name;
    const bool moe = is_expert_tensor(name) || name.ends_with(".router_w");
    if (tp && ((o.sp && is_layernorm(name)) || moe)) tp->all_reduce_sum(engine.grad(t));
    const bool tied_wte = g == 0 && t == lay.unit_first_tensor(u) && tied;
    if (tied_wte) continue;
    if (!ep) {
      engine.ready(t);
    } else if (is_expert_tensor(name)) {
      for (float& x : engine.grad(t)) x /= float(o.ep);
      engine.ready(t);
    } else {
      dense.push_back(engine.grad(t));
      averaging.push_back(t);
    }
  }
  if (!dense.empty()) ep->start_average(dense);
}

void Trainer::Impl::finish_dense_average() {
  if (averaging.empty()) return;
  ep->finish_average();
  for (size_t t : averaging) engine.ready(t);
  averaging.clear();
}

void Trainer::Impl::launch_tied_reduction() {
  tied_work = planted(Fault::skip_tied_reduction)
                  ? tied.barrier()
                  : tied.all_reduce(strata::buffer(wte_grad()), strata::ReduceOp::sum);
}

void Trainer::Impl::load_batch(Split split, int step, int m) {
  // This rank's place among the ranks reading their own data: its rank in the ep x dp group,
  // after the earlier islands' readers.
  const int reader = mesh.coord(strata::Dim::ep) + o.ep * mesh.coord(strata::Dim::dp) +
                     islands.index * data_ranks(o, islands.island.size());
  const size_t first = size_t(reader) * size_t(o.micro_batches * micro) + size_t(m * micro);
  data.batch(split, o.seed, uint64_t(step), first, size_t(micro), o.model.ctx, tokens, targets);
  if (!cp) return;
  // Context parallelism: this rank's positions of each sequence, in local order.
  const int T = o.model.ctx, Tl = T / o.cp;
  for (std::vector<int>* v : {&tokens, &targets}) {
    for (int b = 0; b < micro; ++b)
      for (int p = 0; p < Tl; ++p)
        (*v)[size_t(b) * Tl + p] = (*v)[size_t(b) * T + size_t(cp->position(p, Tl))];
    v->resize(size_t(micro) * Tl);
  }
}

// Micro-batch `micro` forward through chunk c (into `slot`); returns this rank's share of the
// loss: the mean cross-entropy on the model's last stage (tp rank 0's: every tp rank has it),
// plus the load-balancing loss of the chunk's mixture-of-experts blocks (each tp rank's share).
float Trainer::Impl::forward(int micro_id, int c, int step, Split split, int slot) {
  Model& model = chunks[size_t(c)];
  model.select(slot);
  engine.begin_forward();
  if (model.has_embed()) {
    load_batch(split, step, micro_id);
    engine.gather(size_t(unit_of[0]));
    model.embed(tokens, unit_params(0));
    engine.release(size_t(unit_of[0]));
  } else {
    pipe.recv_activation(c, model.input());
  }
  for (int l = model.first_layer(); l < model.last_layer(); ++l) {
    const double b0 = ep ? ep->sent_bytes() : 0, s0 = ep ? ep->exchange_seconds() : 0;
    engine.gather(size_t(unit_of[size_t(1 + l)]));
    model.block(l, unit_params(1 + l));
    engine.release(size_t(unit_of[size_t(1 + l)]));
    if (split == Split::train && o.model.moe_block(l))
      tally_routing(l, model.expert_stats(l), b0, s0);
  }
  if (!model.has_head()) {
    pipe.send_activation(c, model.output());
    return model.aux_loss();
  }
  const int head = o.model.layers + 1;
  const size_t wu = wte_unit();
  load_batch(split, step, micro_id);
  engine.gather(wu);
  engine.gather(size_t(unit_of[size_t(head)]));
  // The training loss: the cross-entropy and the experts' load-balancing loss, if any.
  const float ce = model.head(targets, unit_params(head), wte());
  const float loss = (mesh.coord(strata::Dim::tp) == 0 ? ce : 0.0f) + model.aux_loss();
  engine.release(size_t(unit_of[size_t(head)]));
  engine.release(wu);
  return loss;
}

// Micro-batch `micro` backward through chunk c, adding into the gradients (written by micro-batch
// 0); the last micro-batch marks each unit's gradients ready as soon as they are final.
void Trainer::Impl::backward(int micro_id, int c) {
  Model& model = chunks[size_t(c)];
  model.select(micro_id % pipe.slots(c));
  engine.begin_backward();
  const bool acc = micro_id > 0, last = micro_id + 1 == o.micro_batches;
  const int head = o.model.layers + 1;
  if (model.has_head()) {
    const size_t wu = wte_unit();
    engine.gather(wu);
    engine.gather(size_t(unit_of[size_t(head)]));
    model.head_backward(unit_params(head), wte(), unit_grads(head), wte_grad(),
                        1.0f / float(o.micro_batches), acc);
    if (last) ready_unit(head);
    engine.release(size_t(unit_of[size_t(head)]));
    engine.release(wu);
    if (last && wte_copy >= 0) launch_tied_reduction();
  } else {
    pipe.recv_gradient(c, model.output_grad());
  }
  for (int l = model.last_layer() - 1; l >= model.first_layer(); --l) {
    engine.gather(size_t(unit_of[size_t(1 + l)]));
    const double b0 = ep ? ep->sent_bytes() : 0, s0 = ep ? ep->exchange_seconds() : 0;
    model.block_backward(l, unit_params(1 + l), unit_grads(1 + l), acc);
    if (ep && o.model.moe_block(l)) tally_exchange(l, b0, s0);
    if (last) ready_unit(1 + l);
    engine.release(size_t(unit_of[size_t(1 + l)]));
  }
  if (!model.has_embed()) {
    pipe.send_gradient(c, model.input_grad());
    return;
  }
  // embed_backward adds to wte's gradient, which the head writes first where it is on this rank.
  Grads g0 = unit_grads(0);
  if (wte_copy < 0 && tied && !acc) std::fill(g0[0].begin(), g0[0].end(), 0.0f);
  model.embed_backward(g0, acc);
  if (last) {
    ready_unit(0);
    if (tied) launch_tied_reduction();
  }
}

double Trainer::Impl::reduce_loss(double local) {
  // Every rank's share of the loss (forward), averaged over the ranks reading their own data and
  // over cp (each cp rank's loss is the mean over its positions).
  std::vector<double> v{local};
  metrics.all_reduce(strata::buffer(v), strata::ReduceOp::sum).wait();
  return v[0] / (data_ranks(o, metrics.size()) * o.cp);
}

std::vector<StepReport::Stage> Trainer::Impl::gather_stages(const StepReport& mine) {
  const int n = metrics.size();
  std::vector<double> v{mine.pass_seconds, mine.compute_seconds, mine.tp_bus_bytes, mine.pp_bytes};
  std::vector<double> all(v.size() * size_t(n));
  metrics.all_gather(strata::buffer(v), strata::buffer(all)).wait();
  std::vector<StepReport::Stage> out;
  double span = 0;
  for (int s = 0; s < o.pp; ++s) {
    const double* f = all.data() + size_t(s) * size_t(n / o.pp) * v.size();  // tp 0, dp 0
    out.push_back({f[0], f[1], f[2], f[3], 0.0});
    span = std::max(span, f[0]);
  }
  for (auto& st : out) st.bubble = span > 0 ? 1 - st.compute_seconds / span : 0;
  return out;
}

// Block l's routing of one micro-batch into routed[l]: the tokens each expert took, the dropped
// assignments and, under ep, the exchanges' bytes measured (forward here, backward after
// block_backward) and by formula: this rank's rows for other ranks' experts go out and their
// outputs come back, forward and again backward (and in recompute's forward); summed over
// ranks every row one rank receives is a row another sent, so the world's bytes are 2 x the
// rows sent out x C floats x (2 + recompute), plus each forward's counts for the others' experts.
void Trainer::Impl::tally_routing(int l, const Model::ExpertStats& st, double bytes0,
                                  double seconds0) {
  const int E = o.model.experts;
  std::vector<double>& r = routed[size_t(l)];  // zero where the block is on another stage
  for (int e = 0; e < E; ++e) r[size_t(e)] += st.tokens[size_t(e)];
  r[size_t(E)] += double(st.dropped);
  if (!ep) return;
  tally_exchange(l, bytes0, seconds0);
  const int El = E / o.ep, mine = mesh.coord(strata::Dim::ep) * El, rc = o.recompute ? 1 : 0;
  double out = 0;
  for (int e = 0; e < E; ++e) out += e >= mine && e < mine + El ? 0 : st.tokens[size_t(e)];
  r[size_t(E) + 2] +=
      2 * out * o.model.embd * 4.0 * (2 + rc) + double(E - El) * sizeof(int32_t) * (1 + rc);
}

// The exchanges' bytes and seconds since (bytes0, seconds0), into block l's tally.
void Trainer::Impl::tally_exchange(int l, double bytes0, double seconds0) {
  std::vector<double>& r = routed[size_t(l)];
  const size_t E = size_t(o.model.experts);
  r[E + 1] += ep->sent_bytes() - bytes0;
  r[E + 3] += ep->exchange_seconds() - seconds0;
}

// Every rank's routing of the step, summed (each rank routes its own tokens over all E: its
// share of the sequences under tp), per mixture-of-experts block: routed[l] is [E] tokens per
// expert, dropped, exchange bytes, their formula, exchange seconds.
std::vector<StepReport::Experts> Trainer::Impl::gather_experts() {
  const int E = o.model.experts;
  std::vector<double> all;
  for (int l = 0; l < o.model.layers; ++l) {
    if (!o.model.moe_block(l)) continue;
    std::vector<double>& r = routed[size_t(l)];
    all.insert(all.end(), r.begin(), r.end());
    std::fill(r.begin(), r.end(), 0.0);
  }
  std::vector<StepReport::Experts> out;
  if (all.empty()) return out;
  metrics.all_reduce(strata::buffer(all), strata::ReduceOp::sum).wait();
  size_t at = 0;
  for (int l = 0; l < o.model.layers; ++l) {
    if (!o.model.moe_block(l)) continue;
    const double* v = all.data() + at;
    at += size_t(E) + 4;
    StepReport::Experts x{l, *std::min_element(v, v + E), 0, *std::max_element(v, v + E), v[E]};
    for (int e = 0; e < E; ++e) x.mean += v[e] / E;
    x.a2a_bytes = v[E + 1], x.a2a_bytes_formula = v[E + 2];
    x.a2a_seconds = v[E + 3] / metrics.size();
    out.push_back(x);
  }
  return out;
}

StepReport Trainer::step() {
  try {
    return impl_->step();
  } catch (const strata::Error& e) {
    throw impl_->failures->attribute(e);
  }
}

StepReport Trainer::Impl::step() {
  Impl& I = *this;
  StepReport r;
  r.step = int(I.engine.steps_done());
  r.lr = learning_rate(I.o, r.step);
  I.take_axis_stats(r);  // discards what an evaluation between steps moved
  const auto t0 = std::chrono::steady_clock::now();
  double loss = 0;
  for (const pp::Action& a : I.pipe.actions()) {
    if (a.kind == pp::Action::forward)
      loss += I.forward(a.micro, a.chunk, r.step, Split::train, a.micro % I.pipe.slots(a.chunk));
    else
      I.backward(a.micro, a.chunk);
  }
  // The passes are done; what is left waits on other stages (their part of the tied embedding's
  // gradient, their receives), so it counts as bubble, not compute.
  const auto passes_done = std::chrono::steady_clock::now();
  I.finish_dense_average();
  if (I.tied_work) {
    I.tied_work->wait();
    I.tied_work.reset();
    if (I.ep) I.ep->start_average({I.wte_grad()}), I.ep->finish_average();  // dense, as any
    I.engine.ready(I.wte_tensor());
  }
  I.pipe.finish_sends();
  const auto t1 = std::chrono::steady_clock::now();
  const double tail_wait = std::chrono::duration<double>(t1 - passes_done).count();
  I.engine.set_learning_rate(r.lr);
  I.engine.step();
  if (I.diloco) {
    const strata::OuterStats before = I.diloco->stats();
    r.outer = I.diloco->after_inner_step();
    if (I.engine.steps_done() == I.o.steps) I.diloco->flush();  // the last exchange lands now
    r.outer_bytes = I.diloco->stats().bytes - before.bytes;
    r.outer_seconds = I.diloco->stats().seconds - before.seconds;
  }
  const auto t2 = std::chrono::steady_clock::now();
  r.seconds = std::chrono::duration<double>(t2 - t0).count();
  r.pass_seconds = std::chrono::duration<double>(t1 - t0).count();
  I.take_axis_stats(r);
  r.compute_seconds = r.pass_seconds - r.axes.pp.exposed - tail_wait;
  r.axes.pp.exposed += tail_wait, r.axes.pp.comm = r.axes.pp.exposed;
  r.loss = float(I.reduce_loss(loss / I.o.micro_batches));
  r.stages = I.gather_stages(r);
  r.experts = I.gather_experts();
  return r;
}

// Every axis's figures since the last call into r (docs: StepReport::Axes).
void Trainer::Impl::take_axis_stats(StepReport& r) {
  const Pipeline::Stats ps = pipe.take_stats();
  r.pp_bytes = ps.bytes_sent, r.axes.pp = {ps.recv_wait_seconds, ps.recv_wait_seconds};
  if (tp) {
    r.tp_bus_bytes = tp->take_bus_bytes();
    r.axes.tp.comm = r.axes.tp.exposed = tp->take_seconds();
  }
  if (ep) {
    r.ep_bytes = ep->take_bytes(), r.ep_seconds = ep->take_seconds();
    r.ep_bus_bytes = ep->take_average_bus_bytes();
    const double waited = ep->take_average_wait_seconds();
    r.axes.ep = {r.ep_seconds + waited, r.ep_seconds + waited};
  }
  if (cp) {
    r.cp_bytes = cp->take_bytes(), r.cp_seconds = cp->take_seconds();
    r.axes.cp = {r.cp_seconds, r.cp_seconds};
  }
  const strata::StepStats s = engine.last_step_stats();
  r.comm_seconds = s.comm_seconds, r.exposed_seconds = s.exposed_seconds;
  r.bus_bytes = s.bus_bytes, r.grad_norm = s.grad_norm;
  r.axes.dp = {s.comm_seconds, s.exposed_seconds};
}

float Trainer::evaluate(int batches) {
  try {
    return impl_->evaluate(batches);
  } catch (const strata::Error& e) {
    throw impl_->failures->attribute(e);
  }
}

float Trainer::Impl::evaluate(int batches) {
  Impl& I = *this;
  // Forward only, micro-batch by micro-batch through every chunk in order: each pass waits only
  // for earlier virtual stages, so the pipeline drains without a schedule.
  double sum = 0;
  for (int b = 0; b < batches; ++b)
    for (int m = 0; m < I.o.micro_batches; ++m)
      for (int c = 0; c < I.pipe.chunks(); ++c) sum += I.forward(m, c, b, Split::val, 0);
  I.pipe.finish_sends();
  std::vector<double> loss{I.reduce_loss(sum / (double(batches) * I.o.micro_batches))};
  if (I.diloco) I.diloco->average_over_islands(loss);  // over the islands left
  return float(loss[0]);
}

}  // namespace gpt
