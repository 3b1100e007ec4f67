// The training step of the reference GPT over a ZeroEngine: micro-batches of this rank's slice of
// the global batch, forward and backward unit by unit (gathering in stage 3), gradients marked
// ready in the last micro-batch's backward so buckets launch while backward goes on.
#include "gpt_trainer.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "strata/store.hpp"

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

int checked_micro_batch(const TrainOptions& o, int ranks) {
  const long per_step = long(ranks) * o.micro_batches;
  if (o.micro_batches < 1 || o.global_batch < 1 || o.global_batch % per_step != 0)
    throw std::invalid_argument("global batch " + std::to_string(o.global_batch) +
                                " does not divide into " + std::to_string(ranks) + " ranks x " +
                                std::to_string(o.micro_batches) + " micro-batches");
  return int(o.global_batch / per_step);
}

}  // namespace

struct Trainer::Impl {
  Impl(strata::Communicator dp_comm, const CharCorpus& d, TrainOptions opt)
      : o(std::move(opt)),
        data(d),
        dp(std::move(dp_comm)),
        metrics(dp.split(0, dp.rank())),  // small reductions never queue behind the engine's
        micro(checked_micro_batch(o, dp.size())),
        model(o.model, micro, o.recompute),
        engine(dp, param_specs(o.model), engine_options(o)) {
    if (o.model.vocab != data.vocab())
      throw std::invalid_argument("model vocabulary " + std::to_string(o.model.vocab) +
                                  " but the corpus has " + std::to_string(data.vocab()) +
                                  " characters");
    const size_t tensors = engine.layout().tensors().size();
    for (size_t t = 0; t < tensors; ++t) engine.set_param(t, init_tensor(o.model, o.seed, t));
  }

  template <typename V, typename F>
  std::vector<V> per_tensor(size_t u, F get);
  Params unit_params(size_t u);
  Grads unit_grads(size_t u);
  void ready_unit(size_t u);
  void load_batch(Split split, int step, int m);
  float forward();
  float micro_step(int step, int m, bool last);
  float reduce_mean(float local);

  TrainOptions o;
  const CharCorpus& data;
  strata::Communicator dp, metrics;
  int micro;
  Model model;
  strata::ZeroEngine engine;
  std::vector<int> tokens, targets;
};

template <typename V, typename F>
std::vector<V> Trainer::Impl::per_tensor(size_t u, F get) {
  std::vector<V> out;
  const auto& L = engine.layout();
  for (size_t t = L.unit_first_tensor(u); t < L.unit_last_tensor(u); ++t) out.push_back(get(t));
  return out;
}

Params Trainer::Impl::unit_params(size_t u) {
  return per_tensor<std::span<const float>>(u, [&](size_t t) { return engine.param(t); });
}

Grads Trainer::Impl::unit_grads(size_t u) {
  return per_tensor<std::span<float>>(u, [&](size_t t) { return engine.grad(t); });
}

void Trainer::Impl::load_batch(Split split, int step, int m) {
  const size_t first = size_t(dp.rank()) * size_t(o.micro_batches * micro) + size_t(m * micro);
  data.batch(split, o.seed, uint64_t(step), first, size_t(micro), o.model.ctx, tokens, targets);
}

// Forward through every unit; returns the micro-batch's mean loss. Unit 0 (embeddings) stays
// gathered: the tied head reads wte again at the end, and backward needs it last.
float Trainer::Impl::forward() {
  const int L = o.model.layers;
  const size_t head = size_t(L) + 1;
  engine.begin_forward();
  engine.gather(0);
  model.embed(tokens, unit_params(0));
  for (int l = 0; l < L; ++l) {
    engine.gather(size_t(1 + l));
    model.block(l, unit_params(size_t(1 + l)));
    engine.release(size_t(1 + l));
  }
  engine.gather(head);
  const float loss = model.head(targets, unit_params(head), engine.param(0));
  engine.release(head);
  return loss;
}

void Trainer::Impl::ready_unit(size_t u) {
  const auto& L = engine.layout();
  for (size_t t = L.unit_first_tensor(u); t < L.unit_last_tensor(u); ++t) engine.ready(t);
}

// One micro-batch: forward, then backward through every unit in reverse order.
float Trainer::Impl::micro_step(int step, int m, bool last) {
  const int L = o.model.layers;
  const size_t head = size_t(L) + 1;
  const bool acc = m > 0;
  load_batch(Split::train, step, m);
  const float loss = forward();

  engine.begin_backward();
  engine.gather(head);
  Grads g0 = unit_grads(0);
  model.head_backward(unit_params(head), engine.param(0), unit_grads(head), g0[0],
                      1.0f / float(o.micro_batches), acc);
  if (last) ready_unit(head);
  engine.release(head);
  for (int l = L - 1; l >= 0; --l) {
    engine.gather(size_t(1 + l));
    model.block_backward(l, unit_params(size_t(1 + l)), unit_grads(size_t(1 + l)), acc);
    if (last) ready_unit(size_t(1 + l));
    engine.release(size_t(1 + l));
  }
  model.embed_backward(unit_grads(0), acc);
  if (last) ready_unit(0);
  engine.release(0);
  return loss;
}

float Trainer::Impl::reduce_mean(float local) {
  std::vector<double> v{double(local)};
  metrics.all_reduce(strata::buffer(v), strata::ReduceOp::avg).wait();
  return float(v[0]);
}

Trainer::Trainer(strata::Communicator dp, const CharCorpus& data, TrainOptions o)
    : impl_(std::make_unique<Impl>(std::move(dp), data, std::move(o))) {}
Trainer::~Trainer() = default;

StepReport Trainer::step() {
  Impl& I = *impl_;
  StepReport r;
  r.step = int(I.engine.steps_done());
  r.lr = learning_rate(I.o, r.step);
  const auto t0 = std::chrono::steady_clock::now();
  double loss = 0;
  for (int m = 0; m < I.o.micro_batches; ++m)
    loss += I.micro_step(r.step, m, m + 1 == I.o.micro_batches);
  I.engine.set_learning_rate(r.lr);
  I.engine.step();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.loss = I.reduce_mean(float(loss / I.o.micro_batches));
  const strata::StepStats s = I.engine.last_step_stats();
  r.comm_seconds = s.comm_seconds;
  r.exposed_seconds = s.exposed_seconds;
  r.bus_bytes = s.bus_bytes;
  return r;
}

float Trainer::evaluate(int batches) {
  Impl& I = *impl_;
  double sum = 0;
  for (int b = 0; b < batches; ++b) {
    for (int m = 0; m < I.o.micro_batches; ++m) {
      I.load_batch(Split::val, b, m);
      sum += I.forward();
      I.engine.release(0);
    }
  }
  return I.reduce_mean(float(sum / (double(batches) * I.o.micro_batches)));
}

int Trainer::steps_done() const { return int(impl_->engine.steps_done()); }

std::vector<float> Trainer::parameters() { return impl_->engine.full_params(); }

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
  const strata::FlatLayout& lay = I.engine.layout();
  auto unit = [&](size_t u) {
    return Params(views.begin() + long(lay.unit_first_tensor(u)),
                  views.begin() + long(lay.unit_last_tensor(u)));
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

void Trainer::save(const std::string& dir) { impl_->engine.save(dir); }
void Trainer::load(const std::string& dir) { impl_->engine.load(dir); }
const strata::ZeroEngine& Trainer::engine() const { return impl_->engine; }

}  // namespace gpt
