// The reference GPT's trainer in any tp x pp x dp layout: building the mesh (and the islands),
// this rank's part of the model and its engine; the public calls. The layout's checks and name
// are in layout_check.cpp, one step's work in train_step.cpp, the whole model's assembly in
// whole_model.cpp (trainer_impl.hpp joins them).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "strata/store.hpp"
#include "train/trainer_impl.hpp"

namespace gpt {

strata::Communicator job_communicator() {
  const bool launched =
      std::getenv("RANK") || std::getenv("WORLD_SIZE") || std::getenv("OMPI_COMM_WORLD_SIZE");
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
  z.rule = o.rule;
  z.offload = o.offload;
  return z;
}

}  // namespace

namespace {

// The store of the running job at o.join ("HOST:PORT", checked by the command line), as its
// world group sees it.
std::shared_ptr<strata::Store> joined_store(const TrainOptions& o) {
  const size_t colon = o.join.rfind(':');
  const char* token = std::getenv("STRATA_JOIN_TOKEN");
  if (!token)
    throw std::invalid_argument(
        "--join HOST:PORT needs STRATA_JOIN_TOKEN (the running job's "
        "STRATA_JOB_TOKEN) in the environment");
  strata::TcpStoreOptions so;
  so.host = o.join.substr(0, colon);
  so.port = uint16_t(std::stoi(o.join.substr(colon + 1)));
  so.token = token;
  return std::make_shared<strata::PrefixStore>(std::make_shared<strata::TcpStore>(so), "world");
}

// The job split into islands when DiLoCo is on (check_layout first: the split needs the count);
// a joining job is one island, placed when it is admitted.
strata::Islands make_islands(strata::Communicator& job, const TrainOptions& o) {
  check_layout(o, training_ranks(o, job.size()));
  if (!o.join.empty())
    return strata::Islands{.count = o.islands, .island = job, .store = joined_store(o)};
  if (o.outer_every > 0) return strata::split_islands(job, o.islands);
  return strata::Islands{.island = job};
}

strata::Mesh make_mesh(strata::Communicator& world, const TrainOptions& o) {
  strata::MeshShape shape;
  shape.tp = o.tp, shape.cp = o.cp, shape.ep = o.ep, shape.pp = o.pp;
  strata::MeshOptions mo;
  mo.allow_cross_node_tp = o.allow_cross_node_tp;
  mo.name = "gpt";
  try {
    return strata::Mesh::create(world, shape, mo);
  } catch (const strata::Error& e) {  // a layout this job's nodes cannot hold: bad input
    if (e.code() != strata::ErrorCode::invalid_argument) throw;
    std::string why = e.what();
    if (why.find("spans nodes") != std::string::npos) why += " (strata-gpt: --allow-cross-node-tp)";
    throw std::invalid_argument(why);
  }
}

}  // namespace

Trainer::Impl::Impl(strata::Communicator job, const CharCorpus& d, TrainOptions opt)
    : o(std::move(opt)),
      data(d),
      islands(make_islands(job, o)),
      mesh(make_mesh(islands.island, o)),
      // Small reductions on their own group: they never queue behind the engine's.
      metrics(islands.island.split(0, islands.island.rank(),
                                   strata::CommOptions{.name = "gpt/metrics"})),
      micro(o.global_batch / (data_ranks(o, training_ranks(o, job.size())) * o.micro_batches)),
      tp(o.tp > 1 ? std::make_unique<TensorParallel>(mesh.group(strata::Dim::tp), o.sp) : nullptr),
      ep(o.ep > 1 ? std::make_unique<ExpertParallel>(mesh.group(strata::Dim::ep)) : nullptr),
      cp(o.cp > 1 ? make_context_parallel(mesh.group(strata::Dim::cp), o.cp_comm) : nullptr),
      pipe(mesh.group(strata::Dim::pp), o.schedule, o.micro_batches, o.virtual_stages),
      // Parameters are whole on every cp rank, each rank's loss a mean over its positions: the
      // engine averages gradients over cp x dp (and shards over it).
      replicas(o.cp > 1 ? mesh.group({strata::Dim::cp, strata::Dim::dp})
                        : mesh.group(strata::Dim::dp)),
      engine(replicas, local_specs(), [&] {
        strata::ZeroOptions z = engine_options(o);
        // Clipping's norm over the rest of the model: the other tp slices, experts, stages.
        if (o.tp * o.ep * o.pp > 1)
          z.grad_norm_group = mesh.group({strata::Dim::tp, strata::Dim::ep, strata::Dim::pp});
        return z;
      }()) {
  if (o.model.vocab != data.vocab())
    throw std::invalid_argument("model vocabulary " + std::to_string(o.model.vocab) +
                                " but the corpus has " + std::to_string(data.vocab()) +
                                " characters");
  // The first and last stage of each pipeline share the tied wte's gradient: one group per
  // pipeline, that is per (tp, cp, ep, dp) coordinate.
  const int stage = mesh.coord(strata::Dim::pp);
  const bool ends = o.pp > 1 && (stage == 0 || stage == o.pp - 1);
  strata::Communicator& world = islands.island;
  const int pipeline = world.rank() % (world.size() / o.pp);  // pp is the slowest dimension
  tied = world.split(ends ? pipeline : -1, stage, strata::CommOptions{.name = "gpt/tied"});
  name_groups(job);
  for (size_t t = 0; t < global_tensor.size(); ++t) {
    const size_t g = size_t(global_tensor[t]);
    engine.set_param(t, slice(g, init_tensor(o.model, o.seed, g)));
  }
  if (o.outer_every == 0) return;
  const bool many = o.islands > 1;
  const strata::DiLoCoOptions outer{.outer_every = o.outer_every,
                                    .lr = o.outer_lr,
                                    .momentum = o.outer_momentum,
                                    .fragments = o.outer_fragments,
                                    .dtype = o.outer_dtype,
                                    .island = many ? islands.island : strata::Communicator(),
                                    .job_store = many ? islands.store : nullptr};
  if (o.join.empty()) {
    diloco = std::make_unique<strata::DiLoCo>(engine, islands.across, outer);
    return;
  }
  diloco = strata::DiLoCo::join(engine, outer);
  // It reads the share of the global batch no other island reads (a lost one's), if any.
  std::vector<bool> read(size_t(o.islands), false);
  for (int i : diloco->islands_left())
    if (i != diloco->island_index()) read[size_t(i % o.islands)] = true;
  const auto free = std::find(read.begin(), read.end(), false);
  islands.index =
      free != read.end() ? int(free - read.begin()) : diloco->island_index() % o.islands;
}

// This rank's part of tensor g (an index into param_specs) given its whole value: its block of
// an expert tensor, its tensor-parallel slice of any other.
std::vector<float> Trainer::Impl::slice(size_t g, std::span<const float> full) const {
  if (ep && is_expert_tensor(param_specs(o.model)[g].name)) {
    const size_t n = full.size() / size_t(ep->size());
    const auto first = full.begin() + long(n) * ep->rank();
    return {first, first + long(n)};
  }
  if (tp) return tp_slice(o.model, g, full, o.tp, tp->rank());
  return {full.begin(), full.end()};
}

// Builds chunks, unit_of, wte_copy and global_tensor; returns the engine's tensors.
std::vector<strata::TensorSpec> Trainer::Impl::local_specs() {
  const Config& c = o.model;
  const std::vector<strata::TensorSpec> all = expert_local_specs(tp_param_specs(c, o.tp), o.ep);
  const int tp_rank = mesh.coord(strata::Dim::tp), ep_rank = mesh.coord(strata::Dim::ep);
  const int L = c.layers;
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
      // a dense one on ep rank 0 only, the tied wte on the first stage only.
      s.in_grad_norm = !copy && (tp_rank == 0 || tp_split(s.name) != TpSplit::replicated) &&
                       (ep_rank == 0 || is_expert_tensor(s.name));
      specs.push_back(s);
      global_tensor.push_back(int(t));
    }
    if (copy)
      wte_copy = next;
    else
      unit_of[size_t(g)] = next;
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
    mo.ep = ep.get();
    mo.cp = cp.get();
    mo.slots = pipe.slots(ch);
    chunks.emplace_back(c, micro, mo);
    chunks.back().set_grad_scale(1.0f / float(o.micro_batches));  // the aux loss's, headless too
  }
  routed.assign(size_t(L), {});
  for (int l = 0; l < L; ++l)
    if (c.moe_block(l)) routed[size_t(l)].assign(size_t(c.experts) + 4, 0.0);
  return specs;
}

// f(engine tensor) for every tensor of global unit g, in order.
template <typename V, typename F>
std::vector<V> Trainer::Impl::per_tensor(int g, F f) {
  const auto& lay = engine.layout();
  const size_t u = size_t(unit_of[size_t(g)]);
  std::vector<V> out;
  for (size_t t = lay.unit_first_tensor(u); t < lay.unit_last_tensor(u); ++t) out.push_back(f(t));
  return out;
}

Params Trainer::Impl::unit_params(int g) {
  return per_tensor<std::span<const float>>(g, [&](size_t t) { return engine.param(t); });
}

Grads Trainer::Impl::unit_grads(int g) {
  return per_tensor<std::span<float>>(g, [&](size_t t) { return engine.grad(t); });
}

// The engine unit of the tied wte this rank's head reads: its own (unit 0) or the last stage's
// copy; wte is that unit's first tensor.
size_t Trainer::Impl::wte_unit() const { return size_t(wte_copy >= 0 ? wte_copy : unit_of[0]); }
size_t Trainer::Impl::wte_tensor() const { return engine.layout().unit_first_tensor(wte_unit()); }
std::span<const float> Trainer::Impl::wte() { return engine.param(wte_tensor()); }
std::span<float> Trainer::Impl::wte_grad() { return engine.grad(wte_tensor()); }

// Every group this rank waits in, by name, with its job ranks: a failure is then named by the
// job rank that died (failure_report.hpp). The mesh numbers its island's ranks from 0.
void Trainer::Impl::name_groups(strata::Communicator& job) {
  using strata::Dim;
  failures = std::make_unique<FailureReport>(job.store(), job.rank(), job.size());
  const int per = islands.island.size(), base = islands.index * per;
  const auto in_job = [&](std::vector<int> ranks) {
    for (int& r : ranks) r += base;
    return ranks;
  };
  std::vector<int> all(static_cast<size_t>(per)), across;
  for (int r = 0; r < per; ++r) all[size_t(r)] = r;
  for (int i = 0; i < islands.count; ++i) across.push_back(i * per + islands.island.rank());
  failures->add_group("gpt/metrics", in_job(all), metrics);
  if (islands.across) failures->add_group(islands.across.name(), across, islands.across);
  for (Dim d : {Dim::tp, Dim::cp, Dim::ep, Dim::pp, Dim::dp})
    failures->add_group("gpt/" + std::string(strata::dim_name(d)), in_job(mesh.group_ranks({d})),
                        mesh.group(d));
  if (o.cp > 1) {
    failures->add_group("gpt/cp+dp", in_job(mesh.group_ranks({Dim::cp, Dim::dp})), replicas);
    failures->add_group("gpt/cp+dp/gather", in_job(mesh.group_ranks({Dim::cp, Dim::dp})));
  }
  failures->add_group("gpt/dp/gather", in_job(mesh.group_ranks({Dim::dp})));
  failures->add_group(
      "gpt/tp+ep+pp", in_job(mesh.group_ranks({Dim::tp, Dim::ep, Dim::pp})),
      o.tp * o.ep * o.pp > 1 ? mesh.group({Dim::tp, Dim::ep, Dim::pp}) : strata::Communicator());
  const std::vector<int> stages = in_job(mesh.group_ranks({Dim::pp}));
  failures->add_group("gpt/tied", {stages.front(), stages.back()}, tied);
}

Trainer::Trainer(strata::Communicator world, const CharCorpus& data, TrainOptions o)
    : impl_(std::make_unique<Impl>(std::move(world), data, std::move(o))) {}
Trainer::~Trainer() = default;

int Trainer::steps_done() const { return int(impl_->engine.steps_done()); }

bool Trainer::leads() const {
  const Impl& I = *impl_;
  // A joining island is a job of its own: its first rank reports there.
  return I.metrics.rank() == 0 && (!I.diloco || !I.o.join.empty() ||
                                   I.diloco->island_index() == I.diloco->islands_left().front());
}

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

const strata::ZeroEngine& Trainer::engine() const { return impl_->engine; }
strata::Mesh& Trainer::mesh() { return impl_->mesh; }

size_t Trainer::activation_bytes() const {
  size_t n = 0;
  for (const Model& m : impl_->chunks) n += m.activation_bytes();
  return n;
}

}  // namespace gpt
