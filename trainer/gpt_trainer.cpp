// The training step of the reference GPT over a ZeroEngine: micro-batches of this rank's slice of
// the global batch, forward and backward unit by unit (gathering in stage 3), gradients marked
// ready in the last micro-batch's backward so buckets launch while backward goes on.
#include "gpt_trainer.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <stdexcept>

#include "failure_report.hpp"
#include "model_checkpoint.hpp"
#include "pipeline_parallel.hpp"
#include "strata/mesh.hpp"
#include "strata/store.hpp"
#include "tensor_parallel.hpp"

namespace gpt {

strata::Communicator job_communicator() {
  const bool launched = std::getenv("RANK") || std::getenv("WORLD_SIZE") ||
                        std::getenv("OMPI_COMM_WORLD_SIZE");
  if (launched) return strata::Communicator::from_env();
  // One rank: a loopback store of our own, for as long as the process lives.
  strata::TcpStoreOptions so;
  so.token = "strata-gpt-" + std::to_string(::getpid());
  static strata::TcpStoreServer server(so);
  so.port = server.port();
  return strata::Communicator::create(std::make_shared<strata::TcpStore>(so), 0, 1);
}

float learning_rate(const TrainOptions& o, int step) {
  if (step < o.warmup) return o.lr * float(step + 1) / float(o.warmup);
  const int decay = std::max(1, o.steps - o.warmup);
  const double t = std::min(1.0, double(step - o.warmup) / decay);
  return o.min_lr + float(0.5 * (1.0 + std::cos(M_PI * t))) * (o.lr - o.min_lr);
}

namespace {

strata::ZeroOptions engine_options(const TrainOptions& o) {
  strata::ZeroOptions z;
  z.stage = o.stage;
  z.adamw.lr = o.lr;
  z.adamw.weight_decay = o.weight_decay;
  z.adamw.max_grad_norm = o.max_grad_norm;
  z.adamw.beta2 = 0.95f;  // GPT practice
  z.prefetch_depth = o.prefetch;
  z.buckets.cap_bytes = o.bucket_bytes;
  z.buckets.first_cap_bytes = std::min(z.buckets.first_cap_bytes, o.bucket_bytes);
  return z;
}

void refuse(const std::string& why) { throw std::invalid_argument(why); }

uint64_t fingerprint(const std::vector<float>& v) {  // FNV-1a over the bytes
  uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace

void check_layout(const TrainOptions& o, int ranks) {
  const Config& c = o.model;
  if (o.tp < 1 || o.pp < 1 || ranks % (o.tp * o.pp) != 0)
    refuse("layout tp=" + std::to_string(o.tp) + " pp=" + std::to_string(o.pp) + ": tp*pp = " +
           std::to_string(o.tp * o.pp) + " does not divide the " + std::to_string(ranks) + " ranks");
  if (c.heads % o.tp != 0)
    refuse("--tp " + std::to_string(o.tp) + " does not divide the " + std::to_string(c.heads) +
           " heads");
  if (o.sp && o.tp < 2) refuse("--sp needs --tp 2 or more (it shards the sequence over tp)");
  if (o.sp && c.ctx % o.tp != 0)
    refuse("--sp: the sequence of " + std::to_string(c.ctx) + " positions does not divide by tp=" +
           std::to_string(o.tp));
  if (o.virtual_stages > 1 && o.schedule != pp::Schedule::interleaved)
    refuse("--virtual-stages " + std::to_string(o.virtual_stages) +
           " needs --schedule interleaved");
  const int stages = o.pp * o.virtual_stages;
  if (stages > c.layers)
    refuse(std::to_string(stages) + " pipeline stages (pp=" + std::to_string(o.pp) + " x " +
           std::to_string(o.virtual_stages) + " virtual) but only " + std::to_string(c.layers) +
           " layers");
  if (o.pp > 1 || o.schedule == pp::Schedule::interleaved)
    pp::check_schedule(o.schedule, o.pp, o.micro_batches, o.virtual_stages);
  const long dp = ranks / (o.tp * o.pp), per_step = dp * o.micro_batches;
  if (o.micro_batches < 1 || o.global_batch < 1 || o.global_batch % per_step != 0)
    refuse("global batch " + std::to_string(o.global_batch) + " does not divide into dp=" +
           std::to_string(dp) + " x " + std::to_string(o.micro_batches) + " micro-batches");
}

std::string layout_name(const TrainOptions& o, int ranks) {
  std::string n;
  if (o.tp > 1) n += "tp" + std::to_string(o.tp) + (o.sp ? ".sp." : ".");
  if (o.pp > 1) {
    n += "pp" + std::to_string(o.pp) + "." + std::string(pp::schedule_name(o.schedule));
    if (o.virtual_stages > 1) n += ".v" + std::to_string(o.virtual_stages);
    n += ".";
  }
  n += "dp" + std::to_string(ranks / (o.tp * o.pp));
  if (o.stage > 0) n += ".zero" + std::to_string(o.stage);
  return n;
}

// Where a rank's tensors are: the engine's units are this rank's share of the model's units
// (tensor-parallel slices of its pipeline chunks' units), in the order below, plus, on the last
// stage of a pipeline, the copy of the tied wte (first, so that its late gradient fills the last
// bucket and holds back no other).
struct Trainer::Impl {
  struct Chunk {
    Model model;
  };

  Impl(strata::Communicator world, const CharCorpus& d, TrainOptions opt);

  std::vector<strata::TensorSpec> local_specs();
  Params unit_params(int g);
  Grads unit_grads(int g);
  std::span<const float> wte();
  std::span<float> wte_grad();
  void ready_unit(int g);
  void load_batch(Split split, int step, int m);
  float forward(int micro, int c, int step, Split split, int slot);
  void backward(int micro, int c);
  void launch_tied_reduction();
  double reduce_loss(double local);
  std::vector<float> whole(const std::vector<float>& local);
  std::vector<StepReport::Stage> gather_stages(const StepReport& mine);
  void name_groups(strata::Communicator& world);
  StepReport step();
  float evaluate(int batches);

  TrainOptions o;
  const CharCorpus& data;
  strata::Mesh mesh;
  strata::Communicator metrics, tied;  // tied: this pipeline's first and last stage (pp > 1)
  int micro;                           // sequences per micro-batch
  std::unique_ptr<TensorParallel> tp;  // null when tp = 1
  Pipeline pipe;
  std::vector<int> unit_of;            // global unit -> engine unit (-1: not on this rank)
  int wte_copy = -1;                   // engine unit of the tied wte copy, or -1
  std::vector<int> global_tensor;      // engine tensor -> index into param_specs
  std::vector<Chunk> chunks;
  strata::ZeroEngine engine;
  std::vector<int> tokens, targets;
  std::optional<strata::Work> tied_work;
  bool tied_pending = false;
  std::unique_ptr<FailureReport> failures;
};

namespace {

strata::Mesh make_mesh(strata::Communicator& world, const TrainOptions& o) {
  check_layout(o, world.size());
  strata::MeshShape shape;
  shape.tp = o.tp, shape.pp = o.pp;
  strata::MeshOptions mo;
  mo.allow_cross_node_tp = o.allow_cross_node_tp;
  mo.name = "gpt";
  try {
    return strata::Mesh::create(world, shape, mo);
  } catch (const strata::Error& e) {  // a layout this job's nodes cannot hold: bad input
    if (e.code() != strata::ErrorCode::invalid_argument) throw;
    std::string why = e.what();
    if (why.find("spans nodes") != std::string::npos)
      why += " (strata-gpt: --allow-cross-node-tp)";
    throw std::invalid_argument(why);
  }
}

}  // namespace

Trainer::Impl::Impl(strata::Communicator world, const CharCorpus& d, TrainOptions opt)
    : o(std::move(opt)),
      data(d),
      mesh(make_mesh(world, o)),
      // Small reductions on their own group: they never queue behind the engine's.
      metrics(world.split(0, world.rank(), strata::CommOptions{.name = "gpt/metrics"})),
      micro(o.global_batch / (mesh.shape().dp * o.micro_batches)),
      tp(o.tp > 1 ? std::make_unique<TensorParallel>(mesh.group(strata::Dim::tp), o.sp) : nullptr),
      pipe(mesh.group(strata::Dim::pp), o.schedule, o.micro_batches, o.virtual_stages),
      engine(mesh.group(strata::Dim::dp), local_specs(), [&] {
        strata::ZeroOptions z = engine_options(o);
        if (o.tp * o.pp > 1) z.grad_norm_group = mesh.group({strata::Dim::tp, strata::Dim::pp});
        return z;
      }()) {
  if (o.model.vocab != data.vocab())
    throw std::invalid_argument("model vocabulary " + std::to_string(o.model.vocab) +
                                " but the corpus has " + std::to_string(data.vocab()) +
                                " characters");
  // The first and last stage of each pipeline share the tied wte's gradient.
  const int stage = mesh.coord(strata::Dim::pp);
  const bool ends = o.pp > 1 && (stage == 0 || stage == o.pp - 1);
  tied = world.split(ends ? mesh.coord(strata::Dim::tp) + o.tp * mesh.coord(strata::Dim::dp) : -1,
                     stage, strata::CommOptions{.name = "gpt/tied"});
  name_groups(world);
  const std::vector<float> none;
  for (size_t t = 0; t < global_tensor.size(); ++t) {
    const size_t g = size_t(global_tensor[t]);
    const std::vector<float> full = init_tensor(o.model, o.seed, g);
    engine.set_param(t, tp ? tp_slice(o.model, g, full, o.tp, tp->rank()) : full);
  }
}

// Builds chunks, unit_of, wte_copy and global_tensor; returns the engine's tensors.
std::vector<strata::TensorSpec> Trainer::Impl::local_specs() {
  const Config& c = o.model;
  const std::vector<strata::TensorSpec> all = tp_param_specs(c, o.tp);
  const int tp_rank = mesh.coord(strata::Dim::tp), L = c.layers;
  const int stages = o.pp * o.virtual_stages;
  unit_of.assign(size_t(L) + 2, -1);
  std::vector<strata::TensorSpec> specs;
  int next = 0;
  auto add_unit = [&](int g, bool copy) {
    for (size_t t = 0; t < all.size(); ++t) {
      if (all[t].unit != g || (copy && t != 0)) continue;
      strata::TensorSpec s = all[t];
      s.unit = next;
      // Count each parameter once in the gradient norm: a replicated tensor on tp rank 0 only,
      // the tied wte on the first stage only.
      s.in_grad_norm = !copy && (tp_rank == 0 || tp_split(s.name) != TpSplit::replicated);
      specs.push_back(s);
      global_tensor.push_back(int(t));
    }
    if (copy) wte_copy = next;
    else unit_of[size_t(g)] = next;
    ++next;
  };
  const bool head_here = pipe.last(pipe.chunks() - 1), embed_here = pipe.first(0);
  if (head_here && !embed_here) add_unit(0, true);
  for (int ch = 0; ch < pipe.chunks(); ++ch) {
    const auto [first, last] = pp::stage_layers(L, stages, pipe.virtual_stage(ch));
    if (first == 0) add_unit(0, false);
    for (int l = first; l < last; ++l) add_unit(1 + l, false);
    if (last == L) add_unit(L + 1, false);
    ModelOptions mo;
    mo.recompute = o.recompute, mo.first_layer = first, mo.last_layer = last, mo.tp = tp.get();
    mo.slots = pipe.slots(ch);
    chunks.push_back({Model(c, micro, mo)});
  }
  return specs;
}

Params Trainer::Impl::unit_params(int g) {
  const auto& lay = engine.layout();
  const size_t u = size_t(unit_of[size_t(g)]);
  Params out;
  for (size_t t = lay.unit_first_tensor(u); t < lay.unit_last_tensor(u); ++t)
    out.push_back(engine.param(t));
  return out;
}

Grads Trainer::Impl::unit_grads(int g) {
  const auto& lay = engine.layout();
  const size_t u = size_t(unit_of[size_t(g)]);
  Grads out;
  for (size_t t = lay.unit_first_tensor(u); t < lay.unit_last_tensor(u); ++t)
    out.push_back(engine.grad(t));
  return out;
}

// The tied wte this rank's head reads: its own (unit 0) or the last stage's copy.
std::span<const float> Trainer::Impl::wte() {
  const int u = wte_copy >= 0 ? wte_copy : unit_of[0];
  return engine.param(engine.layout().unit_first_tensor(size_t(u)));
}
std::span<float> Trainer::Impl::wte_grad() {
  const int u = wte_copy >= 0 ? wte_copy : unit_of[0];
  return engine.grad(engine.layout().unit_first_tensor(size_t(u)));
}

// Marks global unit g's gradients final: under sequence parallelism the LayerNorms' (replicated,
// computed on this rank's rows only) are first summed over the tp group. The tied wte waits for
// its reduction across the pipeline (launch_tied_reduction).
void Trainer::Impl::ready_unit(int g) {
  const auto& lay = engine.layout();
  const size_t u = size_t(unit_of[size_t(g)]);
  for (size_t t = lay.unit_first_tensor(u); t < lay.unit_last_tensor(u); ++t) {
    if (tp && o.sp && is_layernorm(lay.tensors()[t].name))
      tp->all_reduce_sum(engine.grad(t));
    const bool tied_wte = g == 0 && t == lay.unit_first_tensor(u) && tied;
    if (!tied_wte) engine.ready(t);
  }
}

void Trainer::Impl::launch_tied_reduction() {
  tied_work = tied.all_reduce(strata::buffer(wte_grad()), strata::ReduceOp::sum);
  tied_pending = true;
}

void Trainer::Impl::load_batch(Split split, int step, int m) {
  const size_t first = size_t(mesh.coord(strata::Dim::dp)) * size_t(o.micro_batches * micro) +
                       size_t(m * micro);
  data.batch(split, o.seed, uint64_t(step), first, size_t(micro), o.model.ctx, tokens, targets);
}

// Micro-batch `micro` forward through chunk c (into `slot`); returns its mean loss on the
// model's last stage, 0 elsewhere.
float Trainer::Impl::forward(int micro_id, int c, int step, Split split, int slot) {
  Model& model = chunks[size_t(c)].model;
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
    engine.gather(size_t(unit_of[size_t(1 + l)]));
    model.block(l, unit_params(1 + l));
    engine.release(size_t(unit_of[size_t(1 + l)]));
  }
  if (!model.has_head()) {
    pipe.send_activation(c, model.output());
    return 0.0f;
  }
  const int head = o.model.layers + 1, wu = wte_copy >= 0 ? wte_copy : unit_of[0];
  load_batch(split, step, micro_id);
  engine.gather(size_t(wu));
  engine.gather(size_t(unit_of[size_t(head)]));
  const float loss = model.head(targets, unit_params(head), wte());
  engine.release(size_t(unit_of[size_t(head)]));
  engine.release(size_t(wu));
  return loss;
}

// Micro-batch `micro` backward through chunk c, adding into the gradients (written by micro-batch
// 0); the last micro-batch marks each unit's gradients ready as soon as they are final.
void Trainer::Impl::backward(int micro_id, int c) {
  Model& model = chunks[size_t(c)].model;
  model.select(micro_id % pipe.slots(c));
  engine.begin_backward();
  const bool acc = micro_id > 0, last = micro_id + 1 == o.micro_batches;
  const int head = o.model.layers + 1;
  if (model.has_head()) {
    const int wu = wte_copy >= 0 ? wte_copy : unit_of[0];
    engine.gather(size_t(wu));
    engine.gather(size_t(unit_of[size_t(head)]));
    model.head_backward(unit_params(head), wte(), unit_grads(head), wte_grad(),
                        1.0f / float(o.micro_batches), acc);
    if (last) ready_unit(head);
    engine.release(size_t(unit_of[size_t(head)]));
    engine.release(size_t(wu));
    if (last && wte_copy >= 0) launch_tied_reduction();
  } else {
    pipe.recv_gradient(c, model.output_grad());
  }
  for (int l = model.last_layer() - 1; l >= model.first_layer(); --l) {
    engine.gather(size_t(unit_of[size_t(1 + l)]));
    model.block_backward(l, unit_params(1 + l), unit_grads(1 + l), acc);
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
  // The last stage's loss (once per tp group), averaged over the data-parallel replicas.
  const bool counts = pipe.last(pipe.chunks() - 1) && mesh.coord(strata::Dim::tp) == 0;
  std::vector<double> v{counts ? local : 0.0};
  metrics.all_reduce(strata::buffer(v), strata::ReduceOp::sum).wait();
  return v[0] / mesh.shape().dp;
}

// Every group this rank waits in, by name, with its world ranks: a failure is then named by the
// world rank that died (failure_report.hpp).
void Trainer::Impl::name_groups(strata::Communicator& world) {
  using strata::Dim;
  failures = std::make_unique<FailureReport>(world.store(), world.rank(), world.size());
  std::vector<int> all(size_t(world.size()));
  for (int r = 0; r < world.size(); ++r) all[size_t(r)] = r;
  failures->add_group("gpt/metrics", all, metrics);
  for (Dim d : {Dim::tp, Dim::pp, Dim::dp})
    failures->add_group("gpt/" + std::string(strata::dim_name(d)), mesh.group_ranks({d}),
                        mesh.group(d));
  failures->add_group("gpt/dp/gather", mesh.group_ranks({Dim::dp}));
  failures->add_group("gpt/tp+pp", mesh.group_ranks({Dim::tp, Dim::pp}),
                      o.tp * o.pp > 1 ? mesh.group({Dim::tp, Dim::pp}) : strata::Communicator());
  const std::vector<int> stages = mesh.group_ranks({Dim::pp});
  failures->add_group("gpt/tied", {stages.front(), stages.back()}, tied);
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

Trainer::Trainer(strata::Communicator world, const CharCorpus& data, TrainOptions o)
    : impl_(std::make_unique<Impl>(std::move(world), data, std::move(o))) {}
Trainer::~Trainer() = default;

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
  if (I.tp) I.tp->take_bus_bytes();
  I.pipe.take_stats();
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
  if (I.tied_pending) {
    I.tied_work->wait();
    I.tied_pending = false;
    I.engine.ready(I.engine.layout().unit_first_tensor(
        size_t(I.wte_copy >= 0 ? I.wte_copy : I.unit_of[0])));
  }
  I.pipe.finish_sends();
  const auto t1 = std::chrono::steady_clock::now();
  const double tail_wait = std::chrono::duration<double>(t1 - passes_done).count();
  I.engine.set_learning_rate(r.lr);
  I.engine.step();
  const auto t2 = std::chrono::steady_clock::now();
  r.seconds = std::chrono::duration<double>(t2 - t0).count();
  r.pass_seconds = std::chrono::duration<double>(t1 - t0).count();
  const Pipeline::Stats ps = I.pipe.take_stats();
  r.compute_seconds = r.pass_seconds - ps.recv_wait_seconds - tail_wait;
  r.pp_bytes = ps.bytes_sent;
  r.tp_bus_bytes = I.tp ? I.tp->take_bus_bytes() : 0.0;
  r.loss = float(I.reduce_loss(loss / I.o.micro_batches));
  r.stages = I.gather_stages(r);
  const strata::StepStats s = I.engine.last_step_stats();
  r.comm_seconds = s.comm_seconds;
  r.exposed_seconds = s.exposed_seconds;
  r.bus_bytes = s.bus_bytes;
  return r;
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
  return float(I.reduce_loss(sum / (double(batches) * I.o.micro_batches)));
}

int Trainer::steps_done() const { return int(impl_->engine.steps_done()); }

// The whole model from per-tensor values laid out as this rank's engine lays its tensors out
// (unpadded, in order): each slice placed into param_specs order by one rank holding it (dp
// coordinate 0, tp rank 0 for a replicated tensor, never the tied copy), then summed over the
// world, where every other rank adds zeros, so the sum is exact.
std::vector<float> Trainer::Impl::whole(const std::vector<float>& local) {
  const auto specs = param_specs(o.model);
  std::vector<size_t> offset(specs.size() + 1, 0);
  for (size_t t = 0; t < specs.size(); ++t) offset[t + 1] = offset[t] + specs[t].numel();
  std::vector<float> out(offset.back(), 0.0f);
  const bool writer = mesh.coord(strata::Dim::dp) == 0;
  const int tpr = mesh.coord(strata::Dim::tp);
  const auto& lay = engine.layout();
  size_t at = 0;
  for (size_t t = 0; t < global_tensor.size(); ++t) {
    const size_t n = lay.tensors()[t].numel(), g = size_t(global_tensor[t]);
    const bool copy = lay.tensors()[t].unit == wte_copy;
    const bool replicated = tp_split(specs[g].name) == TpSplit::replicated;
    if (writer && !copy && (tpr == 0 || !replicated))
      tp_place(o.model, g, std::span<const float>(local.data() + at, n), o.tp, tpr,
               std::span<float>(out.data() + offset[g], specs[g].numel()));
    at += n;
  }
  metrics.all_reduce(strata::buffer(out), strata::ReduceOp::sum).wait();
  return out;
}

std::vector<float> Trainer::parameters() { return impl_->whole(impl_->engine.full_params()); }

std::string Trainer::sample(const std::string& prompt, int n, float temperature, uint64_t seed) {
  Impl& I = *impl_;
  const Config& c = I.o.model;
  // Every rank samples the same text from the gathered parameters on a one-sequence model.
  const std::vector<float> flat = parameters();
  const auto specs = param_specs(c);
  std::vector<std::span<const float>> views;
  size_t off = 0;
  for (const auto& s : specs) {
    views.emplace_back(flat.data() + off, s.numel());
    off += s.numel();
  }
  auto unit = [&](size_t u) {  // the whole model's unit u
    Params p;
    for (size_t t = 0; t < specs.size(); ++t)
      if (size_t(specs[t].unit) == u) p.push_back(views[t]);
    return p;
  };
  Model one(c, 1);
  std::vector<int> ctx = I.data.encode(prompt.empty() ? "\n" : prompt), out;
  std::vector<int> window(size_t(c.ctx)), dummy(size_t(c.ctx), 0);
  uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int i = 0; i < n; ++i) {
    // The last ctx tokens, left-aligned; the prediction is read at the last real position.
    const size_t have = std::min(ctx.size(), size_t(c.ctx));
    std::fill(window.begin(), window.end(), 0);
    std::copy(ctx.end() - long(have), ctx.end(), window.begin());
    one.embed(window, unit(0));
    for (int l = 0; l < c.layers; ++l) one.block(l, unit(size_t(1 + l)));
    one.head(dummy, unit(size_t(c.layers) + 1), views[0]);
    std::span<const float> logits = one.logits(0, int(have) - 1);
    float mx = logits[0];
    for (float v : logits) mx = std::max(mx, v);
    std::vector<double> p(logits.size());
    double z = 0;
    for (size_t k = 0; k < p.size(); ++k) z += p[k] = std::exp((logits[k] - mx) / temperature);
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;  // xorshift64*
    double u = double((rng * 0x2545F4914F6CDD1Dull) >> 11) / double(1ull << 53) * z;
    size_t pick = 0;
    while (pick + 1 < p.size() && (u -= p[pick]) > 0) ++pick;
    ctx.push_back(int(pick));
    out.push_back(int(pick));
  }
  return I.data.decode(out);
}

bool Trainer::replicas_identical() {
  Impl& I = *impl_;
  const auto& lay = I.engine.layout();
  const std::vector<float> mine = I.engine.full_params();
  // Three fingerprints, each compared across the group that must hold equal copies.
  std::vector<float> replicated, tied;
  size_t at = 0;
  for (size_t t = 0; t < lay.tensors().size(); ++t) {
    const size_t n = lay.tensors()[t].numel();
    const bool is_wte = I.global_tensor[t] == 0;
    if (tp_split(lay.tensors()[t].name) == TpSplit::replicated)
      replicated.insert(replicated.end(), mine.begin() + long(at), mine.begin() + long(at + n));
    if (is_wte) tied.assign(mine.begin() + long(at), mine.begin() + long(at + n));
    at += n;
  }
  auto same_across = [](strata::Communicator& g, const std::vector<float>& v) {
    if (!g || g.size() == 1) return true;
    std::vector<int64_t> h{int64_t(fingerprint(v))}, all(size_t(g.size()));
    g.all_gather(strata::buffer(h), strata::buffer(all)).wait();
    return std::all_of(all.begin(), all.end(), [&](int64_t x) { return x == all[0]; });
  };
  std::vector<int> ok{same_across(I.mesh.group(strata::Dim::dp), mine) &&
                      same_across(I.mesh.group(strata::Dim::tp), replicated) &&
                      same_across(I.tied, tied)};
  I.metrics.all_reduce(strata::buffer(ok), strata::ReduceOp::min).wait();
  return ok[0] == 1;
}

void Trainer::save(const std::string& dir) {
  Impl& I = *impl_;
  const strata::EngineState st = I.engine.state();
  const WholeState w{I.o.model, st.steps, I.whole(st.params), I.whole(st.m), I.whole(st.v)};
  // One rank writes; every rank learns whether it could, so none goes on believing it saved.
  std::string error;
  if (I.metrics.rank() == 0) try {
      write_checkpoint(dir, w);
    } catch (const std::exception& e) {
      error = e.what();
    }
  std::vector<int> ok{error.empty() ? 1 : 0};
  I.metrics.broadcast(strata::buffer(ok), 0).wait();
  if (!ok[0]) throw std::runtime_error(error.empty() ? "checkpoint: rank 0 could not write " + dir : error);
}

void Trainer::load(const std::string& dir) {
  Impl& I = *impl_;
  const WholeState w = read_checkpoint(dir);
  const Config& c = I.o.model;
  if (w.model.vocab != c.vocab || w.model.ctx != c.ctx || w.model.layers != c.layers ||
      w.model.heads != c.heads || w.model.embd != c.embd)
    throw std::invalid_argument("checkpoint " + dir + " holds another model (L " +
                                std::to_string(w.model.layers) + ", H " +
                                std::to_string(w.model.heads) + ", C " +
                                std::to_string(w.model.embd) + ", T " +
                                std::to_string(w.model.ctx) + ", V " +
                                std::to_string(w.model.vocab) + ")");
  const auto specs = param_specs(c);
  std::vector<size_t> offset(specs.size() + 1, 0);
  for (size_t t = 0; t < specs.size(); ++t) offset[t + 1] = offset[t] + specs[t].numel();
  const int tpr = I.tp ? I.tp->rank() : 0;
  for (size_t t = 0; t < I.global_tensor.size(); ++t) {
    const size_t g = size_t(I.global_tensor[t]);
    auto slice = [&](const std::vector<float>& all) {
      return tp_slice(c, g, std::span(all).subspan(offset[g], specs[g].numel()), I.o.tp, tpr);
    };
    I.engine.set_state(t, slice(w.params), slice(w.m), slice(w.v));
  }
  I.engine.set_steps_done(w.step);
}

const strata::ZeroEngine& Trainer::engine() const { return impl_->engine; }
strata::Mesh& Trainer::mesh() { return impl_->mesh; }

size_t Trainer::activation_bytes() const {
  size_t n = 0;
  for (const auto& c : impl_->chunks) n += c.model.activation_bytes();
  return n;
}

}  // namespace gpt
