// The reference GPT: shapes, initialisation and the per-unit forward and backward passes, composed
// from the kernels in gpt_layers.cpp. Read gpt_model.hpp first for the unit order and the
// gradient conventions.
#include "gpt_model.hpp"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <utility>

#include "gpt_layers.hpp"
#include "tensor_parallel.hpp"

namespace gpt {

namespace L = layers;

// ---- configuration and parameters --------------------------------------------------------------

Config Config::named(const std::string& name) {
  Config c;
  if (name == "tiny") {
    c.vocab = 65, c.ctx = 16, c.layers = 2, c.heads = 2, c.embd = 32;
  } else if (name == "small") {
    c.vocab = 65, c.ctx = 128, c.layers = 6, c.heads = 6, c.embd = 192;
  } else {
    throw std::invalid_argument("gpt::Config::named: unknown configuration '" + name +
                                "' (known: tiny, small)");
  }
  return c;
}

size_t Config::num_params() const {
  size_t n = 0;
  for (const auto& s : param_specs(*this)) n += s.numel();
  return n;
}

namespace {

// Per-block tensors in unit order, with their shapes in terms of C.
struct BlockTensor {
  const char* name;
  int rows_in_c;  // rows as a multiple of C (0: a vector)
  int cols_in_c;  // columns (or vector length) as a multiple of C
};
constexpr BlockTensor kBlock[] = {{"ln1_w", 0, 1},  {"ln1_b", 0, 1},    {"attn_w", 3, 1},
                                  {"attn_b", 0, 3}, {"proj_w", 1, 1},   {"proj_b", 0, 1},
                                  {"ln2_w", 0, 1},  {"ln2_b", 0, 1},    {"fc_w", 4, 1},
                                  {"fc_b", 0, 4},   {"fcproj_w", 1, 4}, {"fcproj_b", 0, 1}};
constexpr int kBlockTensors = 12;
// Indices into a block unit's Params.
enum { LN1W, LN1B, ATTNW, ATTNB, PROJW, PROJB, LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB };

void check_config(const Config& c) {
  if (c.vocab < 1 || c.ctx < 1 || c.layers < 1 || c.heads < 1 || c.embd < 1)
    throw std::invalid_argument("gpt::Config: every dimension must be positive");
  if (c.embd % c.heads != 0)
    throw std::invalid_argument("gpt::Config: embd " + std::to_string(c.embd) +
                                " does not divide by heads " + std::to_string(c.heads));
}

// splitmix64: a counter-based generator, so element i of tensor t needs no state.
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<strata::TensorSpec> param_specs(const Config& c) {
  check_config(c);
  const size_t V = c.vocab, T = c.ctx, C = c.embd;
  std::vector<strata::TensorSpec> s;
  s.push_back({"wte", {V, C}, 0});
  s.push_back({"wpe", {T, C}, 0});
  for (int l = 0; l < c.layers; ++l) {
    for (const auto& b : kBlock) {
      std::vector<size_t> shape;
      if (b.rows_in_c) shape.push_back(b.rows_in_c * C);
      shape.push_back(b.cols_in_c * C);
      std::string name = "h";  // built piecewise: GCC 12 warns (-Wrestrict) on "h" + ... + "."
      name += std::to_string(l);
      name += '.';
      name += b.name;
      s.push_back({std::move(name), shape, 1 + l});
    }
  }
  s.push_back({"lnf_w", {C}, c.layers + 1});
  s.push_back({"lnf_b", {C}, c.layers + 1});
  return s;
}

std::vector<float> init_tensor(const Config& c, uint64_t seed, size_t t) {
  const auto specs = param_specs(c);
  if (t >= specs.size())
    throw std::out_of_range("gpt::init_tensor: tensor " + std::to_string(t) + " of " +
                            std::to_string(specs.size()));
  const std::string& name = specs[t].name;
  const auto ends_with = [&](const char* suffix) {
    const std::string s = suffix;
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  std::vector<float> v(specs[t].numel(), 0.0f);
  if (ends_with("ln1_w") || ends_with("ln2_w") || name == "lnf_w") {
    std::fill(v.begin(), v.end(), 1.0f);
    return v;
  }
  if (ends_with("_b")) return v;  // biases start at zero
  // Weights: N(0, std) by Box-Muller over two hashed uniforms per element.
  double std = 0.02;
  if (ends_with("proj_w")) std = 0.02 / std::sqrt(2.0 * c.layers);  // proj_w and fcproj_w
  const uint64_t key = splitmix64(splitmix64(seed) ^ (0xA24BAED4963EE407ull * (t + 1)));
  constexpr double two_pi = 6.283185307179586476925;
  for (size_t i = 0; i < v.size(); ++i) {
    const uint64_t h1 = splitmix64(key + 2 * i), h2 = splitmix64(key + 2 * i + 1);
    const double u1 = double((h1 >> 11) + 1) * 0x1.0p-53;  // (0, 1]: log is finite
    const double u2 = double(h2 >> 11) * 0x1.0p-53;        // [0, 1)
    v[i] = float(std * std::sqrt(-2.0 * std::log(u1)) * std::cos(two_pi * u2));
  }
  return v;
}

// ---- BLAS threads ------------------------------------------------------------------------------

namespace {
std::atomic<bool> g_blas_threads_set{false};
}

void set_blas_threads(int n) {
  if (n < 1) throw std::invalid_argument("gpt::set_blas_threads: need at least 1 thread");
  openblas_set_num_threads(n);
  g_blas_threads_set = true;
}

int blas_threads() { return openblas_get_num_threads(); }

namespace {
void default_blas_threads() {
  if (g_blas_threads_set) return;
  int n = 1;
  if (const char* e = std::getenv("STRATA_GPT_BLAS_THREADS"); e && *e) {
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    if (*end != '\0' || v < 1 || v > 1024)
      throw std::invalid_argument(std::string("STRATA_GPT_BLAS_THREADS: not a thread count: ") + e);
    n = int(v);
  }
  set_blas_threads(n);
}
}  // namespace

// ---- activations -------------------------------------------------------------------------------

namespace {

// The sizes one rank computes with. Under tensor parallelism attention heads, MLP units and the
// vocabulary are this rank's share; under sequence parallelism the LayerNorm and residual
// regions hold `Nl` of the `N` rows.
struct Dims {
  int B, T, C, N, Nl;  // sequences, positions, channels, rows, rows held in the residual regions
  int Cl, NHl, Hl;     // attention width and heads, MLP width of this rank
  int V, Vl, vfirst;   // vocabulary, this rank's share of the padded vocabulary, its first id
};

Dims dims_of(const Config& c, int B, TensorParallel* tp) {
  const int t = tp ? tp->size() : 1, r = tp ? tp->rank() : 0;
  Dims d;
  d.B = B, d.T = c.ctx, d.C = c.embd, d.N = B * c.ctx;
  d.Nl = tp ? int(tp->local_rows(B, c.ctx)) : d.N;
  d.Cl = c.embd / t, d.NHl = c.heads / t, d.Hl = 4 * c.embd / t;
  d.V = c.vocab, d.Vl = padded_vocab(c.vocab, t) / t, d.vfirst = r * d.Vl;
  return d;
}

// One block's activations. Without recompute there is one per layer and slot; with recompute a
// single one is shared: block() fills it on the way forward (only the output is kept) and
// block_backward() fills it again from the block's input.
struct BlockActs {
  std::vector<float> ln1, ln1_mean, ln1_rstd;  // [Nl, C], [Nl], [Nl]
  std::vector<float> qkv;                      // [N, 3 Cl]
  std::vector<float> att;                      // [B, NHl, T, T] softmax probabilities
  std::vector<float> atty;                     // [N, Cl] attention output before the projection
  std::vector<float> res2;                     // [Nl, C] residual after attention
  std::vector<float> ln2, ln2_mean, ln2_rstd;  // [Nl, C], [Nl], [Nl]
  std::vector<float> fch, fch_gelu;            // [N, Hl]

  explicit BlockActs(const Dims& d)
      : ln1(size_t(d.Nl) * d.C),
        ln1_mean(d.Nl),
        ln1_rstd(d.Nl),
        qkv(size_t(d.N) * 3 * d.Cl),
        att(size_t(d.B) * d.NHl * d.T * d.T),
        atty(size_t(d.N) * d.Cl),
        res2(size_t(d.Nl) * d.C),
        ln2(size_t(d.Nl) * d.C),
        ln2_mean(d.Nl),
        ln2_rstd(d.Nl),
        fch(size_t(d.N) * d.Hl),
        fch_gelu(size_t(d.N) * d.Hl) {}
  size_t bytes() const {
    size_t n = 0;
    for (const auto* v : {&ln1, &ln1_mean, &ln1_rstd, &qkv, &att, &atty, &res2, &ln2, &ln2_mean,
                          &ln2_rstd, &fch, &fch_gelu})
      n += v->size();
    return n * sizeof(float);
  }
};

// What one micro-batch keeps from forward to backward.
struct Slot {
  std::vector<int> tokens;   // [N] ids in this rank's vocabulary slice, -1 if not
  std::vector<int> targets;  // [N] the same for the targets
  bool have_targets = false;
  std::vector<std::vector<float>> res;  // blocks + 1 of [Nl, C]: res[i] is block first+i's input
  std::vector<BlockActs> acts;          // one per block, none with recompute
  std::vector<float> lnf, lnf_mean, lnf_rstd;  // head only: [Nl, C], [Nl], [Nl]
  std::vector<float> logits, probs;            // head only: [N, Vl]
  size_t bytes() const {
    size_t n = (tokens.size() + targets.size()) * sizeof(int);
    for (const auto& r : res) n += r.size() * sizeof(float);
    for (const auto& a : acts) n += a.bytes();
    for (const auto* v : {&lnf, &lnf_mean, &lnf_rstd, &logits, &probs})
      n += v->size() * sizeof(float);
    return n;
  }
};

// The edges of the parallel regions (tensor_parallel.hpp): without tensor parallelism rows are
// all local and partial sums are already whole.
struct Regions {
  TensorParallel* tp;
  const Dims& d;
  const float* enter(const float* local, float* full) const {
    return tp ? tp->gather_rows(local, full, d.B, d.T, d.C) : local;
  }
  float* leave(float* partial, float* rows) const {
    return tp ? tp->reduce_rows(partial, rows, d.B, d.T, d.C) : partial;
  }
};

// out = (x + b) + red, row by row: the residual, the bias of a row-parallel matmul (added once,
// after the reduction) and the reduced product.
void residual_add(float* out, const float* x, const float* b, const float* red, int rows, int C) {
  for (int n = 0; n < rows; ++n) {
    const size_t o = size_t(n) * C;
    for (int i = 0; i < C; ++i) out[o + i] = (x[o + i] + b[i]) + red[o + i];
  }
}

}  // namespace

struct Model::State {
  Dims d;
  std::vector<std::vector<std::pair<std::string, size_t>>> shapes;  // per unit: (name, elements)
  std::vector<Slot> slots;
  Slot* cur = nullptr;
  std::vector<BlockActs> shared;  // recompute: the one set every block refills
  // Backward scratch, shared by all layers and slots.
  std::vector<float> dres;        // [Nl, C]: gradient of the residual stream
  std::vector<float> dbtc;        // [N, C]: the attention output's gradient; a discard
  std::vector<float> partial;     // [N, C]: a row-parallel product before its reduction
  std::vector<float> full, rows;  // sequence parallelism: [N, C] gathered, [Nl, C] reduced
  std::vector<float> dqkv;        // [N, 3 Cl]
  std::vector<float> dfch;        // [N, Hl]
  std::vector<float> dlogits;     // [N, Vl]
  std::vector<float> datt;        // [T, T]
  std::vector<double> dsum;       // sums over rows: max(T*C, 4C)

  explicit State(const Dims& dims) : d(dims) {}
  BlockActs& acts(int i) { return shared.empty() ? cur->acts[size_t(i)] : shared[0]; }
  size_t bytes() const {
    size_t n = 0;
    for (const auto& s : slots) n += s.bytes();
    for (const auto& a : shared) n += a.bytes();
    for (const auto* v : {&dres, &dbtc, &partial, &full, &rows, &dqkv, &dfch, &dlogits, &datt})
      n += v->size() * sizeof(float);
    return n + dsum.size() * sizeof(double);
  }
};

Model::Model(const Config& c, int batch, const ModelOptions& o)
    : c_(c),
      B_(batch),
      recompute_(o.recompute),
      first_(o.first_layer),
      last_(o.last_layer < 0 ? c.layers : o.last_layer),
      tp_(o.tp) {
  check_config(c);
  if (batch < 1) throw std::invalid_argument("gpt::Model: batch must be positive");
  if (first_ < 0 || first_ >= last_ || last_ > c.layers)
    throw std::invalid_argument("gpt::Model: blocks [" + std::to_string(first_) + ", " +
                                std::to_string(last_) + ") outside the model's " +
                                std::to_string(c.layers));
  if (o.slots < 1) throw std::invalid_argument("gpt::Model: slots must be positive");
  if (tp_ && tp_->sequence_parallel() && c.ctx % tp_->size() != 0)
    throw std::invalid_argument("sequence parallelism: the sequence of " + std::to_string(c.ctx) +
                                " positions does not divide by tp=" + std::to_string(tp_->size()));
  default_blas_threads();
  const Dims d = dims_of(c, batch, tp_);
  s_ = std::make_unique<State>(d);
  State& s = *s_;
  const size_t N = d.N, Nl = d.Nl, C = d.C, blocks = size_t(last_ - first_);
  s.shapes.resize(size_t(c.layers) + 2);
  for (const auto& t : tp_param_specs(c, tp_ ? tp_->size() : 1))
    s.shapes[size_t(t.unit)].emplace_back(t.name, t.numel());
  s.slots.resize(size_t(o.slots));
  for (Slot& sl : s.slots) {
    sl.tokens.resize(N);
    sl.targets.resize(N);
    sl.res.assign(blocks + 1, std::vector<float>(Nl * C));
    if (!recompute_)
      for (size_t i = 0; i < blocks; ++i) sl.acts.emplace_back(d);
    if (has_head()) {
      sl.lnf.resize(Nl * C), sl.lnf_mean.resize(Nl), sl.lnf_rstd.resize(Nl);
      sl.logits.resize(N * d.Vl), sl.probs.resize(N * d.Vl);
    }
  }
  s.cur = &s.slots[0];
  if (recompute_) s.shared.emplace_back(d);
  s.dres.resize(Nl * C);
  s.dbtc.resize(N * C);
  s.partial.resize(N * C);
  if (tp_ && tp_->sequence_parallel()) s.full.resize(N * C), s.rows.resize(Nl * C);
  s.dqkv.resize(N * 3 * d.Cl);
  s.dfch.resize(N * d.Hl);
  if (has_head()) s.dlogits.resize(N * d.Vl);
  s.datt.resize(size_t(d.T) * d.T);
  s.dsum.resize(std::max(size_t(d.T) * C, 4 * C));
}

Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

size_t Model::activation_bytes() const { return s_->bytes(); }

void Model::select(int slot) {
  if (slot < 0 || size_t(slot) >= s_->slots.size())
    throw std::out_of_range("gpt::Model::select: slot " + std::to_string(slot) + " of " +
                            std::to_string(s_->slots.size()));
  s_->cur = &s_->slots[size_t(slot)];
}

std::span<float> Model::input() { return s_->cur->res.front(); }
std::span<const float> Model::output() const { return s_->cur->res.back(); }
std::span<float> Model::output_grad() { return s_->dres; }
std::span<const float> Model::input_grad() const { return s_->dres; }

// ---- argument checks ---------------------------------------------------------------------------

namespace {

template <class Span>
void check_span(const char* where, const std::string& what, const Span& sp, size_t want) {
  if (sp.size() != want)
    throw std::invalid_argument(std::string("gpt::Model::") + where + ": " + what + " has " +
                                std::to_string(sp.size()) + " elements, expected " +
                                std::to_string(want));
}

// The expected tensors of each unit (name, elements), from Model::State.
using UnitShapes = std::vector<std::vector<std::pair<std::string, size_t>>>;

template <class Spans>
void check_unit(const char* where, const UnitShapes& shapes, int unit, const Spans& spans) {
  const auto& mine = shapes[size_t(unit)];
  if (spans.size() != mine.size())
    throw std::invalid_argument(std::string("gpt::Model::") + where + ": unit " +
                                std::to_string(unit) + " has " + std::to_string(mine.size()) +
                                " tensors, got " + std::to_string(spans.size()) + " spans");
  for (size_t i = 0; i < mine.size(); ++i)
    check_span(where, mine[i].first, spans[i], mine[i].second);
}

// Checks global token ids and stores them as ids in this rank's vocabulary slice (-1: another's).
void local_tokens(const char* where, std::span<const int> t, const Dims& d, std::vector<int>& out) {
  check_span(where, "the token span", t, size_t(d.N));
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] < 0 || t[i] >= d.V)
      throw std::invalid_argument(std::string("gpt::Model::") + where + ": token " +
                                  std::to_string(t[i]) + " at position " + std::to_string(i) +
                                  " is outside [0, " + std::to_string(d.V) + ")");
    out[i] = t[i] >= d.vfirst && t[i] < d.vfirst + d.Vl ? t[i] - d.vfirst : -1;
  }
}

void check_part(const char* where, bool has, const char* what) {
  if (!has)
    throw std::logic_error(std::string("gpt::Model::") + where + ": this part has no " + what);
}

}  // namespace

void Model::check_layer(const char* where, int l) const {
  if (l < first_ || l >= last_)
    throw std::invalid_argument(std::string("gpt::Model::") + where + ": layer " +
                                std::to_string(l) + " outside [" + std::to_string(first_) + ", " +
                                std::to_string(last_) + ")");
}

// ---- forward -----------------------------------------------------------------------------------

void Model::embed(std::span<const int> tokens, const Params& unit0) {
  check_part("embed", has_embed(), "embeddings");
  check_unit("embed", s_->shapes, 0, unit0);
  State& s = *s_;
  const Dims& d = s.d;
  local_tokens("embed", tokens, d, s.cur->tokens);
  float* out = s.cur->res[0].data();
  if (!tp_) {
    L::embed_forward(out, s.cur->tokens.data(), unit0[0].data(), unit0[1].data(), d.N, d.T, d.C);
    return;
  }
  // Vocabulary-parallel: the rows of tokens in this rank's slice, zero for the others, summed
  // over the group (g), then the position embedding of each row this rank holds.
  for (int n = 0; n < d.N; ++n) {
    float* p = s.partial.data() + size_t(n) * d.C;
    const int tok = s.cur->tokens[n];
    if (tok < 0)
      std::fill(p, p + d.C, 0.0f);
    else
      std::copy_n(unit0[0].data() + size_t(tok) * d.C, d.C, p);
  }
  const float* red = Regions{tp_, d}.leave(s.partial.data(), s.rows.data());
  for (int i = 0; i < d.Nl; ++i) {
    const float* pe = unit0[1].data() + size_t(tp_->position(size_t(i), d.T)) * d.C;
    for (int k = 0; k < d.C; ++k) out[size_t(i) * d.C + k] = red[size_t(i) * d.C + k] + pe[k];
  }
}

namespace {
// Scratch a block's passes use besides its activations.
struct BlockScratch {
  float *partial, *full, *rows;
};

// One block's forward from its input x [Nl, C] into out [Nl, C], keeping what backward needs in
// a. Column-parallel matmuls take all rows (entering), row-parallel ones leave partial sums
// that are reduced before the bias and the residual are added.
void block_forward(BlockActs& a, float* out, const float* x, const Params& p, const Dims& d,
                   const Regions& reg, const BlockScratch& s) {
  const int N = d.N, Nl = d.Nl, C = d.C;
  L::layernorm_forward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x, p[LN1W].data(),
                       p[LN1B].data(), Nl, C);
  L::matmul_forward(a.qkv.data(), reg.enter(a.ln1.data(), s.full), p[ATTNW].data(), p[ATTNB].data(),
                    N, C, 3 * d.Cl);
  L::attention_forward(a.atty.data(), a.att.data(), a.qkv.data(), d.B, d.T, d.Cl, d.NHl);
  L::matmul_forward(s.partial, a.atty.data(), p[PROJW].data(), nullptr, N, d.Cl, C);
  residual_add(a.res2.data(), x, p[PROJB].data(), reg.leave(s.partial, s.rows), Nl, C);
  L::layernorm_forward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.res2.data(),
                       p[LN2W].data(), p[LN2B].data(), Nl, C);
  L::matmul_forward(a.fch.data(), reg.enter(a.ln2.data(), s.full), p[FCW].data(), p[FCB].data(), N,
                    C, d.Hl);
  L::gelu_forward(a.fch_gelu.data(), a.fch.data(), size_t(N) * d.Hl);
  L::matmul_forward(s.partial, a.fch_gelu.data(), p[FCPROJW].data(), nullptr, N, d.Hl, C);
  residual_add(out, a.res2.data(), p[FCPROJB].data(), reg.leave(s.partial, s.rows), Nl, C);
}
}  // namespace

void Model::block(int l, const Params& p) {
  check_layer("block", l);
  check_unit("block", s_->shapes, 1 + l, p);
  State& s = *s_;
  const int i = l - first_;
  block_forward(s.acts(i), s.cur->res[size_t(i) + 1].data(), s.cur->res[size_t(i)].data(), p, s.d,
                Regions{tp_, s.d}, {s.partial.data(), s.full.data(), s.rows.data()});
}

float Model::head(std::span<const int> targets, const Params& lnf, std::span<const float> wte) {
  check_part("head", has_head(), "head");
  State& s = *s_;
  const Dims& d = s.d;
  Slot& sl = *s.cur;
  check_unit("head", s.shapes, c_.layers + 1, lnf);
  check_span("head", "wte", wte, size_t(d.Vl) * d.C);
  sl.have_targets = !targets.empty();
  if (sl.have_targets) local_tokens("head", targets, d, sl.targets);
  L::layernorm_forward(sl.lnf.data(), sl.lnf_mean.data(), sl.lnf_rstd.data(), sl.res.back().data(),
                       lnf[0].data(), lnf[1].data(), d.Nl, d.C);
  // Tied head: logits[N, Vl] = lnf[N, C] wte[Vl, C]^T (this rank's vocabulary slice).
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, d.N, d.Vl, d.C, 1.0f,
              Regions{tp_, d}.enter(sl.lnf.data(), s.full.data()), d.C, wte.data(), d.C, 0.0f,
              sl.logits.data(), d.Vl);
  const int* tg = sl.have_targets ? targets.data() : nullptr;
  const double total =
      tp_ ? tp_->cross_entropy(sl.probs.data(), sl.logits.data(), tg, d.N, d.Vl, d.vfirst, d.V)
          : L::crossentropy_forward(sl.probs.data(), sl.logits.data(), tg, d.N, d.V);
  return sl.have_targets ? float(total / d.N) : std::numeric_limits<float>::quiet_NaN();
}

std::span<const float> Model::logits(int b, int t) const {
  if (tp_ && tp_->size() > 1)
    throw std::logic_error("gpt::Model::logits: each rank holds only a slice of the vocabulary");
  check_part("logits", has_head(), "head");
  if (b < 0 || b >= B_ || t < 0 || t >= c_.ctx)
    throw std::out_of_range("gpt::Model::logits: (" + std::to_string(b) + ", " + std::to_string(t) +
                            ") outside the batch");
  const size_t V = c_.vocab;
  return {s_->cur->logits.data() + (size_t(b) * c_.ctx + t) * V, V};
}

// ---- backward ----------------------------------------------------------------------------------

void Model::head_backward(const Params& lnf, std::span<const float> wte, const Grads& lnf_grad,
                          std::span<float> wte_grad, float grad_scale, bool accumulate) {
  check_part("head_backward", has_head(), "head");
  State& s = *s_;
  const Dims& d = s.d;
  Slot& sl = *s.cur;
  if (!sl.have_targets)
    throw std::logic_error("gpt::Model::head_backward: head() ran without targets");
  check_unit("head_backward", s.shapes, c_.layers + 1, lnf);
  check_unit("head_backward", s.shapes, c_.layers + 1, lnf_grad);
  check_span("head_backward", "wte", wte, size_t(d.Vl) * d.C);
  check_span("head_backward", "the wte gradient", wte_grad, size_t(d.Vl) * d.C);
  const Regions reg{tp_, d};
  // The loss is the mean over N positions and every gradient is scaled by grad_scale: both enter
  // here, at the top, and flow down through every backward.
  L::crossentropy_backward(s.dlogits.data(), sl.probs.data(), sl.targets.data(), d.N, d.Vl,
                           grad_scale / float(d.N));
  // dwte (+)= dlogits^T lnf ;  dlnf = dlogits wte (partial sums over the vocabulary slices)
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d.Vl, d.C, d.N, 1.0f, s.dlogits.data(), d.Vl,
              reg.enter(sl.lnf.data(), s.full.data()), d.C, accumulate ? 1.0f : 0.0f,
              wte_grad.data(), d.C);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d.N, d.C, d.Vl, 1.0f, s.dlogits.data(),
              d.Vl, wte.data(), d.C, 0.0f, s.partial.data(), d.C);
  const float* dlnf = reg.leave(s.partial.data(), s.rows.data());
  // The residual stream's gradient starts here (written, not added).
  std::fill(s.dres.begin(), s.dres.end(), 0.0f);
  L::layernorm_backward(s.dres.data(), lnf_grad[0].data(), lnf_grad[1].data(), dlnf,
                        sl.res.back().data(), lnf[0].data(), sl.lnf_mean.data(), sl.lnf_rstd.data(),
                        d.Nl, d.C, accumulate, s.dsum.data());
}

void Model::block_backward(int l, const Params& p, const Grads& g, bool accumulate) {
  check_layer("block_backward", l);
  check_unit("block_backward", s_->shapes, 1 + l, p);
  check_unit("block_backward", s_->shapes, 1 + l, g);
  State& s = *s_;
  const Dims& d = s.d;
  const int N = d.N, Nl = d.Nl, C = d.C, i = l - first_;
  const Regions reg{tp_, d};
  BlockActs& a = s.acts(i);
  const float* x = s.cur->res[size_t(i)].data();
  // Activation checkpointing: rebuild this block's activations from its kept input. Same inputs,
  // same code: bit-identical to the forward pass. Only the output (already kept) is discarded.
  if (recompute_)
    block_forward(a, s.dbtc.data(), x, p, d, reg, {s.partial.data(), s.full.data(), s.rows.data()});

  float* dres = s.dres.data();  // in: d(block output); out: d(block input)
  double* sum = s.dsum.data();
  // out = res2 + fcproj(gelu(fc(ln2(res2)))): the MLP branch, last op first. Sequence
  // parallelism gathers the rows of each gradient leaving a region, and re-gathers each
  // column-parallel input instead of keeping it (as Megatron does).
  L::matmul_backward(s.dfch.data(), g[FCPROJW].data(), g[FCPROJB].data(),
                     reg.enter(dres, s.full.data()), a.fch_gelu.data(), p[FCPROJW].data(), N, d.Hl,
                     C, accumulate, false, sum);
  L::gelu_backward(s.dfch.data(), a.fch.data(), s.dfch.data(), size_t(N) * d.Hl);
  L::matmul_backward(s.partial.data(), g[FCW].data(), g[FCB].data(), s.dfch.data(),
                     reg.enter(a.ln2.data(), s.full.data()), p[FCW].data(), N, C, d.Hl, accumulate,
                     false, sum);
  // d(res2) = d(out) (residual path, already in dres) + the LayerNorm path, added in place.
  L::layernorm_backward(dres, g[LN2W].data(), g[LN2B].data(),
                        reg.leave(s.partial.data(), s.rows.data()), a.res2.data(), p[LN2W].data(),
                        a.ln2_mean.data(), a.ln2_rstd.data(), Nl, C, accumulate, sum);
  // res2 = x + proj(attention(qkv(ln1(x)))): the attention branch.
  L::matmul_backward(s.dbtc.data(), g[PROJW].data(), g[PROJB].data(),
                     reg.enter(dres, s.full.data()), a.atty.data(), p[PROJW].data(), N, d.Cl, C,
                     accumulate, false, sum);
  L::attention_backward(s.dqkv.data(), s.dbtc.data(), a.qkv.data(), a.att.data(), d.B, d.T, d.Cl,
                        d.NHl, s.datt.data());
  L::matmul_backward(s.partial.data(), g[ATTNW].data(), g[ATTNB].data(), s.dqkv.data(),
                     reg.enter(a.ln1.data(), s.full.data()), p[ATTNW].data(), N, C, 3 * d.Cl,
                     accumulate, false, sum);
  L::layernorm_backward(dres, g[LN1W].data(), g[LN1B].data(),
                        reg.leave(s.partial.data(), s.rows.data()), x, p[LN1W].data(),
                        a.ln1_mean.data(), a.ln1_rstd.data(), Nl, C, accumulate, sum);
}

void Model::embed_backward(const Grads& unit0_grad, bool accumulate) {
  check_part("embed_backward", has_embed(), "embeddings");
  check_unit("embed_backward", s_->shapes, 0, unit0_grad);
  State& s = *s_;
  const Dims& d = s.d;
  // All rows of the gradient: wte's rows of this rank's tokens, and wpe's over every sequence.
  L::embed_backward(unit0_grad[0].data(), unit0_grad[1].data(),
                    Regions{tp_, d}.enter(s.dres.data(), s.full.data()), s.cur->tokens.data(), d.N,
                    d.T, d.C, accumulate, s.dsum.data());
}

}  // namespace gpt
