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
constexpr BlockTensor kBlock[] = {
    {"ln1_w", 0, 1}, {"ln1_b", 0, 1}, {"attn_w", 3, 1},   {"attn_b", 0, 3},
    {"proj_w", 1, 1}, {"proj_b", 0, 1}, {"ln2_w", 0, 1},   {"ln2_b", 0, 1},
    {"fc_w", 4, 1},   {"fc_b", 0, 4},   {"fcproj_w", 1, 4}, {"fcproj_b", 0, 1}};
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
      throw std::invalid_argument(std::string("STRATA_GPT_BLAS_THREADS: not a thread count: ") +
                                  e);
    n = int(v);
  }
  set_blas_threads(n);
}
}  // namespace

// ---- activations -------------------------------------------------------------------------------

// One block's activations for B*T = N positions. Without recompute there is one per layer; with
// recompute a single one is shared: block() fills it on the way forward (only the output is kept)
// and block_backward() fills it again from the block's input.
struct BlockActs {
  std::vector<float> ln1, ln1_mean, ln1_rstd;  // [N, C], [N], [N]
  std::vector<float> qkv;                      // [N, 3C]
  std::vector<float> att;                      // [B, NH, T, T] softmax probabilities
  std::vector<float> atty;                     // [N, C] attention output before the projection
  std::vector<float> res2;                     // [N, C] residual after attention
  std::vector<float> ln2, ln2_mean, ln2_rstd;  // [N, C], [N], [N]
  std::vector<float> fch, fch_gelu;            // [N, 4C]

  BlockActs(size_t B, size_t T, size_t C, size_t NH)
      : ln1(B * T * C), ln1_mean(B * T), ln1_rstd(B * T), qkv(B * T * 3 * C),
        att(B * NH * T * T), atty(B * T * C), res2(B * T * C), ln2(B * T * C), ln2_mean(B * T),
        ln2_rstd(B * T), fch(B * T * 4 * C), fch_gelu(B * T * 4 * C) {}
  size_t bytes() const {
    size_t n = 0;
    for (const auto* v : {&ln1, &ln1_mean, &ln1_rstd, &qkv, &att, &atty, &res2, &ln2, &ln2_mean,
                          &ln2_rstd, &fch, &fch_gelu})
      n += v->size();
    return n * sizeof(float);
  }
};

struct Model::State {
  std::vector<std::vector<std::pair<std::string, size_t>>> shapes;  // per unit: (name, elements)
  std::vector<int> tokens, targets;       // [N]
  bool have_targets = false;
  std::vector<std::vector<float>> res;    // L+1 of [N, C]: res[l] is block l's input
  std::vector<BlockActs> acts;            // L, or 1 with recompute
  std::vector<float> lnf, lnf_mean, lnf_rstd;  // [N, C], [N], [N]
  std::vector<float> logits, probs;       // [N, V]
  // Backward scratch, shared by all layers.
  std::vector<float> dres;                // [N, C]: gradient of the residual stream
  std::vector<float> dbtc;                // [N, C]: gradient of a LayerNorm output / atty
  std::vector<float> dqkv;                // [N, 3C]
  std::vector<float> dfch;                // [N, 4C]
  std::vector<float> dlogits;             // [N, V]
  std::vector<float> datt;                // [T, T]
  std::vector<double> dsum;               // sums over rows: max(T*C, 4C)

  size_t bytes() const {
    size_t n = (tokens.size() + targets.size()) * sizeof(int);
    for (const auto& r : res) n += r.size() * sizeof(float);
    for (const auto& a : acts) n += a.bytes();
    for (const auto* v : {&lnf, &lnf_mean, &lnf_rstd, &logits, &probs, &dres, &dbtc, &dqkv, &dfch,
                          &dlogits, &datt})
      n += v->size() * sizeof(float);
    return n + dsum.size() * sizeof(double);
  }
};

Model::Model(const Config& c, int batch, bool recompute) : c_(c), B_(batch), recompute_(recompute) {
  check_config(c);
  if (batch < 1) throw std::invalid_argument("gpt::Model: batch must be positive");
  default_blas_threads();
  const size_t B = batch, T = c.ctx, C = c.embd, V = c.vocab, N = B * T;
  s_ = std::make_unique<State>();
  State& s = *s_;
  for (int u = 0; u < c.layers + 2; ++u) s.shapes.emplace_back();
  for (const auto& t : param_specs(c)) s.shapes[size_t(t.unit)].emplace_back(t.name, t.numel());
  s.tokens.resize(N);
  s.targets.resize(N);
  s.res.assign(c.layers + 1, std::vector<float>(N * C));
  const size_t sets = recompute ? 1 : size_t(c.layers);
  s.acts.reserve(sets);
  for (size_t i = 0; i < sets; ++i) s.acts.emplace_back(B, T, C, size_t(c.heads));
  s.lnf.resize(N * C);
  s.lnf_mean.resize(N);
  s.lnf_rstd.resize(N);
  s.logits.resize(N * V);
  s.probs.resize(N * V);
  s.dres.resize(N * C);
  s.dbtc.resize(N * C);
  s.dqkv.resize(N * 3 * C);
  s.dfch.resize(N * 4 * C);
  s.dlogits.resize(N * V);
  s.datt.resize(T * T);
  s.dsum.resize(std::max(T * C, 4 * C));
}

Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

size_t Model::activation_bytes() const { return s_->bytes(); }

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
  for (size_t i = 0; i < mine.size(); ++i) check_span(where, mine[i].first, spans[i], mine[i].second);
}

void check_tokens(const char* where, std::span<const int> t, size_t n, int V) {
  check_span(where, "the token span", t, n);
  for (size_t i = 0; i < n; ++i)
    if (t[i] < 0 || t[i] >= V)
      throw std::invalid_argument(std::string("gpt::Model::") + where + ": token " +
                                  std::to_string(t[i]) + " at position " + std::to_string(i) +
                                  " is outside [0, " + std::to_string(V) + ")");
}

void check_layer(const char* where, int l, int layers) {
  if (l < 0 || l >= layers)
    throw std::invalid_argument(std::string("gpt::Model::") + where + ": layer " +
                                std::to_string(l) + " outside [0, " + std::to_string(layers) + ")");
}

}  // namespace

// ---- forward -----------------------------------------------------------------------------------

void Model::embed(std::span<const int> tokens, const Params& unit0) {
  const int T = c_.ctx, C = c_.embd, N = B_ * T;
  check_tokens("embed", tokens, size_t(N), c_.vocab);
  check_unit("embed", s_->shapes, 0, unit0);
  std::copy(tokens.begin(), tokens.end(), s_->tokens.begin());
  L::embed_forward(s_->res[0].data(), s_->tokens.data(), unit0[0].data(), unit0[1].data(), N, T, C);
}

namespace {
// One block's forward from its input x into out, keeping what backward needs in a.
void block_forward(BlockActs& a, float* out, const float* x, const Params& p, int B, int T, int C,
                   int NH) {
  const int N = B * T;
  L::layernorm_forward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x, p[LN1W].data(),
                       p[LN1B].data(), N, C);
  L::matmul_forward(a.qkv.data(), a.ln1.data(), p[ATTNW].data(), p[ATTNB].data(), N, C, 3 * C);
  L::attention_forward(a.atty.data(), a.att.data(), a.qkv.data(), B, T, C, NH);
  L::matmul_forward(a.res2.data(), a.atty.data(), p[PROJW].data(), p[PROJB].data(), N, C, C, x);
  L::layernorm_forward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.res2.data(),
                       p[LN2W].data(), p[LN2B].data(), N, C);
  L::matmul_forward(a.fch.data(), a.ln2.data(), p[FCW].data(), p[FCB].data(), N, C, 4 * C);
  L::gelu_forward(a.fch_gelu.data(), a.fch.data(), size_t(N) * 4 * C);
  L::matmul_forward(out, a.fch_gelu.data(), p[FCPROJW].data(), p[FCPROJB].data(), N, 4 * C, C,
                    a.res2.data());
}
}  // namespace

void Model::block(int l, const Params& p) {
  check_layer("block", l, c_.layers);
  check_unit("block", s_->shapes, 1 + l, p);
  BlockActs& a = s_->acts[recompute_ ? 0 : l];
  block_forward(a, s_->res[l + 1].data(), s_->res[l].data(), p, B_, c_.ctx, c_.embd, c_.heads);
}

float Model::head(std::span<const int> targets, const Params& lnf, std::span<const float> wte) {
  const int T = c_.ctx, C = c_.embd, V = c_.vocab, N = B_ * T;
  check_unit("head", s_->shapes, c_.layers + 1, lnf);
  check_span("head", "wte", wte, size_t(V) * C);
  s_->have_targets = !targets.empty();
  if (s_->have_targets) {
    check_tokens("head", targets, size_t(N), V);
    std::copy(targets.begin(), targets.end(), s_->targets.begin());
  }
  State& s = *s_;
  L::layernorm_forward(s.lnf.data(), s.lnf_mean.data(), s.lnf_rstd.data(), s.res[c_.layers].data(),
                       lnf[0].data(), lnf[1].data(), N, C);
  // Tied head: logits[N, V] = lnf[N, C] wte[V, C]^T.
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, V, C, 1.0f, s.lnf.data(), C, wte.data(),
              C, 0.0f, s.logits.data(), V);
  const double total = L::crossentropy_forward(s.probs.data(), s.logits.data(),
                                               s.have_targets ? s.targets.data() : nullptr, N, V);
  return s.have_targets ? float(total / N) : std::numeric_limits<float>::quiet_NaN();
}

std::span<const float> Model::logits(int b, int t) const {
  if (b < 0 || b >= B_ || t < 0 || t >= c_.ctx)
    throw std::out_of_range("gpt::Model::logits: (" + std::to_string(b) + ", " +
                            std::to_string(t) + ") outside the batch");
  const size_t V = c_.vocab;
  return {s_->logits.data() + (size_t(b) * c_.ctx + t) * V, V};
}

// ---- backward ----------------------------------------------------------------------------------

void Model::head_backward(const Params& lnf, std::span<const float> wte, const Grads& lnf_grad,
                          std::span<float> wte_grad, float grad_scale, bool accumulate) {
  const int T = c_.ctx, C = c_.embd, V = c_.vocab, N = B_ * T;
  if (!s_->have_targets)
    throw std::logic_error("gpt::Model::head_backward: head() ran without targets");
  check_unit("head_backward", s_->shapes, c_.layers + 1, lnf);
  check_unit("head_backward", s_->shapes, c_.layers + 1, lnf_grad);
  check_span("head_backward", "wte", wte, size_t(V) * C);
  check_span("head_backward", "the wte gradient", wte_grad, size_t(V) * C);
  State& s = *s_;
  // The loss is the mean over N positions and every gradient is scaled by grad_scale: both enter
  // here, at the top, and flow down through every backward.
  L::crossentropy_backward(s.dlogits.data(), s.probs.data(), s.targets.data(), N, V,
                           grad_scale / float(N));
  // dwte (+)= dlogits^T lnf ;  dlnf = dlogits wte
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V, C, N, 1.0f, s.dlogits.data(), V,
              s.lnf.data(), C, accumulate ? 1.0f : 0.0f, wte_grad.data(), C);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, V, 1.0f, s.dlogits.data(), V,
              wte.data(), C, 0.0f, s.dbtc.data(), C);
  // The residual stream's gradient starts here (written, not added).
  std::fill(s.dres.begin(), s.dres.end(), 0.0f);
  L::layernorm_backward(s.dres.data(), lnf_grad[0].data(), lnf_grad[1].data(), s.dbtc.data(),
                        s.res[c_.layers].data(), lnf[0].data(), s.lnf_mean.data(),
                        s.lnf_rstd.data(), N, C, accumulate, s.dsum.data());
}

void Model::block_backward(int l, const Params& p, const Grads& g, bool accumulate) {
  check_layer("block_backward", l, c_.layers);
  check_unit("block_backward", s_->shapes, 1 + l, p);
  check_unit("block_backward", s_->shapes, 1 + l, g);
  const int B = B_, T = c_.ctx, C = c_.embd, NH = c_.heads, N = B * T;
  State& s = *s_;
  BlockActs& a = s.acts[recompute_ ? 0 : l];
  const float* x = s.res[l].data();
  // Activation checkpointing: rebuild this block's activations from its kept input. Same inputs,
  // same code: bit-identical to the forward pass. Only the output (already kept) is discarded.
  if (recompute_) block_forward(a, s.dbtc.data(), x, p, B, T, C, NH);

  float* dres = s.dres.data();  // in: d(block output); out: d(block input)
  double* sum = s.dsum.data();
  // out = res2 + fcproj(gelu(fc(ln2(res2)))): the MLP branch, last op first.
  L::matmul_backward(s.dfch.data(), g[FCPROJW].data(), g[FCPROJB].data(), dres, a.fch_gelu.data(),
                     p[FCPROJW].data(), N, 4 * C, C, accumulate, false, sum);
  L::gelu_backward(s.dfch.data(), a.fch.data(), s.dfch.data(), size_t(N) * 4 * C);
  L::matmul_backward(s.dbtc.data(), g[FCW].data(), g[FCB].data(), s.dfch.data(), a.ln2.data(),
                     p[FCW].data(), N, C, 4 * C, accumulate, false, sum);
  // d(res2) = d(out) (residual path, already in dres) + the LayerNorm path, added in place.
  L::layernorm_backward(dres, g[LN2W].data(), g[LN2B].data(), s.dbtc.data(), a.res2.data(),
                        p[LN2W].data(), a.ln2_mean.data(), a.ln2_rstd.data(), N, C, accumulate,
                        sum);
  // res2 = x + proj(attention(qkv(ln1(x)))): the attention branch.
  L::matmul_backward(s.dbtc.data(), g[PROJW].data(), g[PROJB].data(), dres, a.atty.data(),
                     p[PROJW].data(), N, C, C, accumulate, false, sum);
  L::attention_backward(s.dqkv.data(), s.dbtc.data(), a.qkv.data(), a.att.data(), B, T, C, NH,
                        s.datt.data());
  L::matmul_backward(s.dbtc.data(), g[ATTNW].data(), g[ATTNB].data(), s.dqkv.data(),
                     a.ln1.data(), p[ATTNW].data(), N, C, 3 * C, accumulate, false, sum);
  L::layernorm_backward(dres, g[LN1W].data(), g[LN1B].data(), s.dbtc.data(), x, p[LN1W].data(),
                        a.ln1_mean.data(), a.ln1_rstd.data(), N, C, accumulate, sum);
}

void Model::embed_backward(const Grads& unit0_grad, bool accumulate) {
  check_unit("embed_backward", s_->shapes, 0, unit0_grad);
  const int T = c_.ctx, C = c_.embd, N = B_ * T;
  L::embed_backward(unit0_grad[0].data(), unit0_grad[1].data(), s_->dres.data(), s_->tokens.data(),
                    N, T, C, accumulate, s_->dsum.data());
}

}  // namespace gpt
