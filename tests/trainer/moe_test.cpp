// The mixture-of-experts layer (trainer/model/moe.hpp) against an independent reference: the same
// layer written here naively in double precision, whose central finite differences give the true
// gradient; and routing, capacity and the auxiliary loss against cases computed by hand.
#include "model/moe.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace {

using std::vector;

// ---- the reference: routing and the layer in double, naive loops --------------------------------

struct Params {
  int C, E, k;
  vector<double> x, router, fc_w, fc_b, fcproj_w, fcproj_b, w;  // w: the loss's weights
};

double gelu(double v) {
  return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
}

// The loss sum(w out) + coef aux of B sequences of T rows, capacity `cap` (<= 0: none).
double ref_loss(const Params& P, int B, int T, double cap, double coef) {
  const int C = P.C, E = P.E, k = P.k, H = 4 * C, N = B * T;
  vector<double> prob(size_t(N) * E);
  vector<vector<int>> chosen(N);
  vector<vector<double>> gate(N);
  for (int n = 0; n < N; ++n) {
    double mx = -1e300, sum = 0;
    vector<double> z(E);
    for (int e = 0; e < E; ++e) {
      for (int i = 0; i < C; ++i) z[e] += P.x[n * C + i] * P.router[e * C + i];
      mx = std::max(mx, z[e]);
    }
    for (int e = 0; e < E; ++e) sum += prob[n * E + e] = std::exp(z[e] - mx);
    for (int e = 0; e < E; ++e) prob[n * E + e] /= sum;
    vector<int> idx(E);
    for (int e = 0; e < E; ++e) idx[e] = e;
    std::stable_sort(idx.begin(), idx.end(),
                     [&](int a, int b) { return prob[n * E + a] > prob[n * E + b]; });
    double s = 0;
    for (int j = 0; j < k; ++j) chosen[n].push_back(idx[j]), s += prob[n * E + idx[j]];
    for (int j = 0; j < k; ++j) gate[n].push_back(prob[n * E + idx[j]] / s);
  }
  vector<vector<bool>> kept(N, vector<bool>(k, true));
  double aux = 0;
  for (int b = 0; b < B; ++b) {
    for (int e = 0; e < E; ++e) {
      vector<std::pair<double, int>> mine;  // (-prob, n * k + j)
      double P_e = 0;
      for (int n = b * T; n < (b + 1) * T; ++n) {
        P_e += prob[n * E + e] / T;
        for (int j = 0; j < k; ++j)
          if (chosen[n][j] == e) mine.push_back({-prob[n * E + e], n * k + j});
      }
      aux += E * (double(mine.size()) / (T * k)) * P_e / B;
      if (cap <= 0) continue;
      std::stable_sort(mine.begin(), mine.end());
      const size_t c = size_t(std::ceil(cap * T * k / E));
      for (size_t i = c; i < mine.size(); ++i) kept[mine[i].second / k][mine[i].second % k] = false;
    }
  }
  double loss = coef * aux;
  for (int n = 0; n < N; ++n) {
    for (int j = 0; j < k; ++j) {
      if (!kept[n][j]) continue;
      const int e = chosen[n][j];
      vector<double> h(H), out(C);
      for (int o = 0; o < H; ++o) {
        double s = P.fc_b[e * H + o];
        for (int i = 0; i < C; ++i) s += P.x[n * C + i] * P.fc_w[(size_t(e) * H + o) * C + i];
        h[o] = gelu(s);
      }
      for (int o = 0; o < C; ++o) {
        double s = P.fcproj_b[e * C + o];
        for (int i = 0; i < H; ++i) s += h[i] * P.fcproj_w[(size_t(e) * C + o) * H + i];
        loss += P.w[n * C + o] * gate[n][j] * s;
      }
    }
  }
  return loss;
}

Params random_params(int N, int C, int E, int k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> g(0, 1);
  auto fill = [&](size_t n, double sd) {
    vector<double> v(n);
    for (double& x : v) x = float(g(rng) * sd);  // representable in float: both sides see it
    return v;
  };
  const int H = 4 * C;
  return {C,
          E,
          k,
          fill(size_t(N) * C, 1),
          fill(size_t(E) * C, 0.5),
          fill(size_t(E) * H * C, 0.3),
          fill(size_t(E) * H, 0.1),
          fill(size_t(E) * C * H, 0.2),
          fill(size_t(E) * C, 0.1),
          fill(size_t(N) * C, 1)};
}

vector<float> f32(const vector<double>& v) { return vector<float>(v.begin(), v.end()); }

// ||a - b|| / ||b||
double rel_l2(const vector<float>& a, const vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
  return std::sqrt(num / den);
}

// The layer's forward loss and gradients against the reference's loss and its central
// differences, for every tensor (every element: these are small).
void check_gradients(int B, int T, int C, int E, int k, double cap, uint32_t seed) {
  const int N = B * T;
  Params P = random_params(N, C, E, k, seed);
  const double coef = 0.1;
  auto x = f32(P.x), router = f32(P.router), w1 = f32(P.fc_w), b1 = f32(P.fc_b),
       w2 = f32(P.fcproj_w), b2 = f32(P.fcproj_b), dout = f32(P.w);
  gpt::moe::Acts a(B, T, C, E, k);
  const gpt::moe::Experts ex{w1.data(), b1.data(), w2.data(), b2.data()};
  vector<float> out(size_t(N) * C);
  gpt::moe::forward(a, out.data(), x.data(), router.data(), ex, cap);
  double loss = coef * a.r.aux;
  for (size_t i = 0; i < out.size(); ++i) loss += double(dout[i]) * out[i];
  EXPECT_NEAR(loss, ref_loss(P, B, T, cap, coef), 1e-4 * std::abs(loss) + 1e-5);
  if (cap > 0) {
    EXPECT_GT(a.r.dropped, 0) << "the case must drop something to test dropping";
  }

  vector<float> dx(x.size(), 0.0f), drouter(router.size()), dw1(w1.size()), db1(b1.size()),
      dw2(w2.size()), db2(b2.size());
  gpt::moe::Scratch s(B, T, C, E, k);
  gpt::moe::backward(dx.data(), drouter.data(), {dw1.data(), db1.data(), dw2.data(), db2.data()},
                     dout.data(), a, x.data(), router.data(), ex, float(coef), false, s);
  auto numeric = [&](vector<double>& v) {
    vector<double> g(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      const double keep = v[i], eps = 1e-4;
      v[i] = keep + eps;
      const double up = ref_loss(P, B, T, cap, coef);
      v[i] = keep - eps;
      g[i] = (up - ref_loss(P, B, T, cap, coef)) / (2 * eps);
      v[i] = keep;
    }
    return g;
  };
  // float's rounding over sums of up to 4C terms, against differences exact to ~1e-8.
  const double bound = 2e-4;
  EXPECT_LT(rel_l2(dx, numeric(P.x)), bound) << "x";
  EXPECT_LT(rel_l2(drouter, numeric(P.router)), bound) << "router_w";
  EXPECT_LT(rel_l2(dw1, numeric(P.fc_w)), bound) << "fc_w";
  EXPECT_LT(rel_l2(db1, numeric(P.fc_b)), bound) << "fc_b";
  EXPECT_LT(rel_l2(dw2, numeric(P.fcproj_w)), bound) << "fcproj_w";
  EXPECT_LT(rel_l2(db2, numeric(P.fcproj_b)), bound) << "fcproj_b";
}

TEST(Moe, GradientsMatchTheReferenceDropless) { check_gradients(2, 5, 4, 4, 2, 0, 1); }
TEST(Moe, GradientsMatchTheReferenceTop1) { check_gradients(1, 6, 4, 3, 1, 0, 2); }
// Capacity 0.75 of 4 experts, top-2, 6 rows: ceil(0.75 * 6 * 2 / 4) = 3 per expert and sequence.
TEST(Moe, GradientsMatchTheReferenceWithCapacity) { check_gradients(2, 6, 4, 4, 2, 0.75, 3); }

// Four tokens of one sequence, two experts, top-1, capacity 0.5: ceil(0.5 * 4 / 2) = 1 assignment
// per expert. Every token prefers expert 0 (probabilities 0.9, 0.8, 0.9, 0.6): expert 0 keeps the
// most probable, and of the two at 0.9 the earlier, token 0; the other three are dropped.
TEST(Moe, CapacityDropsTheLeastProbableThenTheLater) {
  const double p[] = {0.9, 0.8, 0.9, 0.6};
  vector<float> logits;
  for (double q : p) logits.push_back(float(std::log(q / (1 - q)))), logits.push_back(0.0f);
  gpt::moe::Routing r;
  gpt::moe::route(r, logits.data(), 1, 4, 2, 1, 0.5);
  for (int n = 0; n < 4; ++n) {
    EXPECT_EQ(r.expert[n], 0) << n;
    EXPECT_NEAR(r.probs[n * 2], p[n], 1e-6) << n;
    EXPECT_EQ(r.gate[n], 1.0f) << "top-1 renormalises to 1";
    EXPECT_EQ(r.kept[n], n == 0 ? 1 : 0) << n;
  }
  EXPECT_EQ(r.dropped, 3);
  EXPECT_EQ(r.load[0], 4);
  EXPECT_EQ(r.load[1], 0);
  // aux = E sum_e f_e P_e = 2 (1 * mean p0 + 0 * mean p1) = 2 * 0.8.
  EXPECT_NEAR(r.aux, 1.6, 1e-6);
  gpt::moe::route(r, logits.data(), 1, 4, 2, 1, 0);
  EXPECT_EQ(r.dropped, 0) << "dropless";
}

// Top-2 of three experts with two equal probabilities: the lower id first; gates renormalised.
TEST(Moe, TopKTakesTheLowerIdOnATieAndRenormalises) {
  const vector<float> logits = {1.0f, 2.0f, 2.0f};
  gpt::moe::Routing r;
  gpt::moe::route(r, logits.data(), 1, 1, 3, 2, 0);
  EXPECT_EQ(r.expert[0], 1);
  EXPECT_EQ(r.expert[1], 2);
  EXPECT_FLOAT_EQ(r.gate[0], 0.5f);
  EXPECT_FLOAT_EQ(r.gate[1], 0.5f);
}

}  // namespace
