// The reference GPT's model (trainer/model/gpt_model.hpp) against an independent reference: a
// second, naive implementation of the same network in double precision written here, whose
// central finite differences give the true gradient of every tensor. The model's other
// properties: gpt_model_test.cpp.
#include "tests/trainer/model_steps.hpp"

namespace {

using namespace model_steps;

// ---- the independent reference: the same network, naive loops, double precision --------------

using DTensors = std::vector<std::vector<double>>;

void ref_layernorm(std::vector<double>& out, const std::vector<double>& x, const double* w,
                   const double* b, int N, int C) {
  out.assign(size_t(N) * C, 0.0);
  for (int n = 0; n < N; ++n) {
    double m = 0, v = 0;
    for (int i = 0; i < C; ++i) m += x[n * C + i] / C;
    for (int i = 0; i < C; ++i) v += (x[n * C + i] - m) * (x[n * C + i] - m) / C;
    for (int i = 0; i < C; ++i)
      out[n * C + i] = (x[n * C + i] - m) / std::sqrt(v + 1e-5) * w[i] + b[i];
  }
}

// y[n, o] = b[o] + sum_i x[n, i] W[o, i]
void ref_linear(std::vector<double>& y, const std::vector<double>& x, const double* W,
                const double* b, int N, int IC, int OC) {
  y.assign(size_t(N) * OC, 0.0);
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < OC; ++o) {
      double s = b[o];
      for (int i = 0; i < IC; ++i) s += x[size_t(n) * IC + i] * W[size_t(o) * IC + i];
      y[size_t(n) * OC + o] = s;
    }
}

double ref_loss(const Config& c, const DTensors& P, const std::vector<int>& tok,
                const std::vector<int>& tgt, int B) {
  const int T = c.ctx, C = c.embd, V = c.vocab, NH = c.heads, hs = C / NH, N = B * T;
  std::vector<double> x(size_t(N) * C), ln, qkv, y(size_t(N) * C), proj, h, f;
  for (int n = 0; n < N; ++n)
    for (int i = 0; i < C; ++i) x[n * C + i] = P[0][tok[n] * C + i] + P[1][(n % T) * C + i];
  for (int l = 0; l < c.layers; ++l) {
    const DTensors::const_iterator p = P.begin() + 2 + 12 * l;
    ref_layernorm(ln, x, p[0].data(), p[1].data(), N, C);
    ref_linear(qkv, ln, p[2].data(), p[3].data(), N, C, 3 * C);
    for (int b = 0; b < B; ++b)
      for (int hd = 0; hd < NH; ++hd)
        for (int t = 0; t < T; ++t) {
          const double* q = &qkv[size_t(b * T + t) * 3 * C + hd * hs];
          std::vector<double> w(size_t(t) + 1);
          double mx = -1e300, sum = 0;
          for (int j = 0; j <= t; ++j) {
            const double* k = &qkv[size_t(b * T + j) * 3 * C + C + hd * hs];
            double s = 0;
            for (int d = 0; d < hs; ++d) s += q[d] * k[d];
            w[j] = s / std::sqrt(double(hs));
            mx = std::max(mx, w[j]);
          }
          for (int j = 0; j <= t; ++j) sum += (w[j] = std::exp(w[j] - mx));
          for (int d = 0; d < hs; ++d) {
            double acc = 0;
            for (int j = 0; j <= t; ++j)
              acc += w[j] / sum * qkv[size_t(b * T + j) * 3 * C + 2 * C + hd * hs + d];
            y[size_t(b * T + t) * C + hd * hs + d] = acc;
          }
        }
    ref_linear(proj, y, p[4].data(), p[5].data(), N, C, C);
    for (size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
    ref_layernorm(ln, x, p[6].data(), p[7].data(), N, C);
    ref_linear(h, ln, p[8].data(), p[9].data(), N, C, 4 * C);
    for (double& v : h)
      v = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    ref_linear(f, h, p[10].data(), p[11].data(), N, 4 * C, C);
    for (size_t i = 0; i < x.size(); ++i) x[i] += f[i];
  }
  const size_t lf = 2 + 12 * size_t(c.layers);
  ref_layernorm(ln, x, P[lf].data(), P[lf + 1].data(), N, C);
  double loss = 0;
  for (int n = 0; n < N; ++n) {
    std::vector<double> z(V);
    double mx = -1e300, sum = 0;
    for (int v = 0; v < V; ++v) {
      double s = 0;
      for (int i = 0; i < C; ++i) s += ln[n * C + i] * P[0][v * C + i];
      z[v] = s;
      mx = std::max(mx, s);
    }
    for (int v = 0; v < V; ++v) sum += std::exp(z[v] - mx);
    loss += std::log(sum) + mx - z[tgt[n]];
  }
  return loss / N;
}

DTensors to_double(const Tensors& p) {
  DTensors d;
  for (const auto& t : p) d.emplace_back(t.begin(), t.end());
  return d;
}

// ---- gradient check ----------------------------------------------------------------------------

// Elements checked per tensor: the 4 with the largest analytic gradient plus 8 drawn at random.
std::vector<size_t> sample_elements(const std::vector<float>& g, uint64_t seed) {
  std::vector<size_t> idx(g.size());
  std::iota(idx.begin(), idx.end(), 0);
  const size_t top = std::min<size_t>(4, g.size());
  std::partial_sort(idx.begin(), idx.begin() + ptrdiff_t(top), idx.end(),
                    [&](size_t a, size_t b) { return std::fabs(g[a]) > std::fabs(g[b]); });
  std::vector<size_t> out(idx.begin(), idx.begin() + ptrdiff_t(top));
  std::mt19937_64 rng(seed);
  for (int k = 0; k < 8 && out.size() < g.size(); ++k) {
    size_t i;
    do i = size_t(rng() % g.size());
    while (std::find(out.begin(), out.end(), i) != out.end());
    out.push_back(i);
  }
  return out;
}

class GradCheck : public ::testing::TestWithParam<bool> {};

// Tolerance: the finite differences are of the double-precision reference (step 1e-4, so their
// own error is ~1e-8 relative), so what is left is the float error of the analytic gradient,
// about 1e-7 of the tensor's gradient scale (observed: under 2% of the tolerance below). An
// element passes when
//   |analytic - fd| <= 1e-4 |fd| + 1e-5 * max_t
// where max_t is the largest |fd| in that tensor's sample (which includes its largest gradients).
// A wrong backward term is off by a sizeable fraction of the gradient, far above this (a
// missing LayerNorm mean term, a wrong GELU derivative or an untransposed matmul each fail).
TEST_P(GradCheck, EveryTensorMatchesFiniteDifferencesOfAReference) {
  const bool recompute = GetParam();
  const Config c = Config::named("tiny");
  const int B = 3, N = B * c.ctx;
  Tensors p = init_all(c, 11);
  perturb(c, p, 5);
  const auto tok = random_tokens(size_t(N), c.vocab, 1), tgt = random_tokens(size_t(N), c.vocab, 2);

  gpt::Model m(c, B, recompute);
  const float loss = forward(m, p, tok, tgt);
  Tensors g = zeros_like(p);
  backward(m, p, g, 1.0f, false);

  DTensors dp = to_double(p);
  const double ref = ref_loss(c, dp, tok, tgt, B);
  EXPECT_NEAR(loss, ref, 1e-5 * ref) << "forward loss differs from the reference";

  const auto specs = gpt::param_specs(c);
  const double h = 1e-4;
  double worst = 0, worst_dir = 0;
  for (size_t t = 0; t < p.size(); ++t) {
    const auto elems = sample_elements(g[t], 100 + t);
    std::vector<double> fd;
    for (size_t i : elems) {
      const double v = dp[t][i];
      dp[t][i] = v + h;
      const double up = ref_loss(c, dp, tok, tgt, B);
      dp[t][i] = v - h;
      const double down = ref_loss(c, dp, tok, tgt, B);
      dp[t][i] = v;
      fd.push_back((up - down) / (2 * h));
    }
    // Every element at once, through a directional derivative: d/de L(p + e r) = <g, r> for a
    // random direction r. This catches a wrong element the sample missed (one position of wpe,
    // one row of a weight); the tolerance is 1e-4 of sum |g_i r_i|, the dot product's own scale.
    {
      std::mt19937_64 rng(1000 + t);
      std::normal_distribution<double> nd(0.0, 1.0);
      std::vector<double> r(dp[t].size());
      for (double& x : r) x = nd(rng);
      double dot = 0, scale = 0;
      for (size_t i = 0; i < r.size(); ++i) {
        dot += double(g[t][i]) * r[i];
        scale += std::fabs(double(g[t][i]) * r[i]);
      }
      const std::vector<double> v = dp[t];
      for (size_t i = 0; i < r.size(); ++i) dp[t][i] = v[i] + h * r[i];
      const double up = ref_loss(c, dp, tok, tgt, B);
      for (size_t i = 0; i < r.size(); ++i) dp[t][i] = v[i] - h * r[i];
      const double down = ref_loss(c, dp, tok, tgt, B);
      dp[t] = v;
      const double fd_dot = (up - down) / (2 * h), err = std::fabs(dot - fd_dot);
      worst_dir = std::max(worst_dir, err / (1e-4 * scale));
      EXPECT_LE(err, 1e-4 * scale)
          << specs[t].name << ": <g, r> analytic " << dot << ", finite difference " << fd_dot;
    }
    double max_t = 0;
    for (double d : fd) max_t = std::max(max_t, std::fabs(d));
    ASSERT_GT(max_t, 1e-7) << specs[t].name << ": no gradient at all in the sample";
    for (size_t k = 0; k < elems.size(); ++k) {
      const double a = g[t][elems[k]], err = std::fabs(a - fd[k]);
      const double tol = 1e-4 * std::fabs(fd[k]) + 1e-5 * max_t;
      worst = std::max(worst, err / tol);
      EXPECT_LE(err, tol) << specs[t].name << "[" << elems[k] << "]: analytic " << a
                          << ", finite difference " << fd[k] << " (largest in tensor " << max_t
                          << ")";
    }
  }
  std::printf(
      "gradient check (recompute %d): %zu tensors, worst element error %.3g of its "
      "tolerance, worst directional error %.3g of its tolerance\n",
      int(recompute), p.size(), worst, worst_dir);
}

INSTANTIATE_TEST_SUITE_P(Recompute, GradCheck, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "on" : "off"; });

}  // namespace
