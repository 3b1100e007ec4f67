// Mixture of experts: routing, the experts' MLPs and their backward (moe.hpp says what each
// computes and why capacity is per sequence).
#include "model/moe.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "model/gpt_layers.hpp"

namespace gpt::moe {

namespace L = layers;

void route(Routing& r, const float* logits, int B, int T, int E, int k, double capacity) {
  const int N = B * T;
  r.B = B, r.T = T, r.E = E, r.k = k;
  r.probs.resize(size_t(N) * E);
  r.expert.resize(size_t(N) * k);
  r.gate.resize(size_t(N) * k);
  r.kept.assign(size_t(N) * k, 1);
  r.load.assign(size_t(B) * E, 0);
  r.dropped = 0;
  for (int n = 0; n < N; ++n) {
    const float* z = logits + size_t(n) * E;
    float* p = r.probs.data() + size_t(n) * E;
    const float mx = *std::max_element(z, z + E);
    double sum = 0;
    for (int e = 0; e < E; ++e) sum += p[e] = std::exp(z[e] - mx);
    for (int e = 0; e < E; ++e) p[e] = float(p[e] / sum);
    // The k most probable, in order; a strict comparison keeps the lower id on a tie.
    int* chosen = r.expert.data() + size_t(n) * k;
    double chosen_sum = 0;
    for (int j = 0; j < k; ++j) {
      int best = -1;
      for (int e = 0; e < E; ++e) {
        if (std::find(chosen, chosen + j, e) != chosen + j) continue;
        if (best < 0 || p[e] > p[best]) best = e;
      }
      chosen[j] = best;
      chosen_sum += p[best];
      ++r.load[size_t(n / T) * E + best];
    }
    for (int j = 0; j < k; ++j) r.gate[size_t(n) * k + j] = float(p[chosen[j]] / chosen_sum);
  }
  // The capacity, per sequence and expert: the most probable assignments first, then the earlier.
  if (capacity > 0) {
    const int cap = int(std::ceil(capacity * T * k / E));
    std::vector<std::tuple<float, int, int>> mine;  // (-probability, row, j)
    for (int b = 0; b < B; ++b) {
      for (int e = 0; e < E; ++e) {
        if (r.load[size_t(b) * E + e] <= cap) continue;
        mine.clear();
        for (int n = b * T; n < (b + 1) * T; ++n)
          for (int j = 0; j < k; ++j)
            if (r.expert[size_t(n) * k + j] == e)
              mine.emplace_back(-r.probs[size_t(n) * E + e], n, j);
        std::sort(mine.begin(), mine.end());
        for (size_t i = size_t(cap); i < mine.size(); ++i) {
          r.kept[size_t(std::get<1>(mine[i])) * k + std::get<2>(mine[i])] = 0;
          ++r.dropped;
        }
      }
    }
  }
  double aux = 0;
  for (int b = 0; b < B; ++b) {
    for (int e = 0; e < E; ++e) {
      double P = 0;
      for (int t = 0; t < T; ++t) P += r.probs[(size_t(b) * T + t) * E + e];
      aux += double(E) * (double(r.load[size_t(b) * E + e]) / (double(T) * k)) * (P / T);
    }
  }
  r.aux = aux / B;
}

void order(Order& o, const Routing& r) {
  const size_t assignments = r.expert.size();
  o.first.assign(size_t(r.E) + 1, 0);
  for (size_t s = 0; s < assignments; ++s)
    if (r.kept[s]) ++o.first[size_t(r.expert[s]) + 1];
  for (int e = 0; e < r.E; ++e) o.first[size_t(e) + 1] += o.first[size_t(e)];
  o.slot.resize(size_t(o.first[size_t(r.E)]));
  o.pos.assign(assignments, -1);
  std::vector<int> next(o.first.begin(), o.first.end() - 1);
  for (size_t s = 0; s < assignments; ++s) {  // rows ascending within each expert
    if (!r.kept[s]) continue;
    const int q = next[size_t(r.expert[s])]++;
    o.slot[size_t(q)] = int(s);
    o.pos[s] = q;
  }
}

Acts::Acts(int B_, int T_, int C_, int E_, int k_)
    : B(B_),
      T(T_),
      C(C_),
      E(E_),
      k(k_),
      logits(size_t(B) * T * E),
      xin(size_t(B) * T * k * C),
      h(size_t(B) * T * k * 4 * C),
      hg(h.size()),
      y(xin.size()) {}

size_t Acts::bytes() const {
  return (logits.size() + xin.size() + h.size() + hg.size() + y.size() + r.probs.size() +
          r.gate.size()) *
             sizeof(float) +
         (r.expert.size() + o.slot.size() + o.pos.size()) * sizeof(int);
}

Scratch::Scratch(int N, int C, int E, int k)
    : dy(size_t(N) * k * C),
      dh(size_t(N) * k * 4 * C),
      dlogits(size_t(N) * E),
      sum(size_t(std::max(4 * C, E))) {}

void forward(Acts& a, float* out, const float* x, const float* router_w, const Experts& p, int C,
             double capacity) {
  Routing& r = a.r;
  const int B = a.B, T = a.T, E = a.E, k = a.k, N = B * T, H = 4 * C;
  L::matmul_forward(a.logits.data(), x, router_w, nullptr, N, C, E);
  route(r, a.logits.data(), B, T, E, k, capacity);
  order(a.o, r);
  for (size_t q = 0; q < a.o.slot.size(); ++q)
    std::memcpy(&a.xin[q * C], x + size_t(a.o.slot[q] / k) * C, sizeof(float) * C);
  for (int e = 0; e < E; ++e) {
    const int f = a.o.first[size_t(e)], m = a.o.first[size_t(e) + 1] - f;
    if (m == 0) continue;
    float* h = &a.h[size_t(f) * H];
    L::matmul_forward(h, &a.xin[size_t(f) * C], p.fc_w + size_t(e) * H * C, p.fc_b + size_t(e) * H,
                      m, C, H);
    L::gelu_forward(&a.hg[size_t(f) * H], h, size_t(m) * H);
    L::matmul_forward(&a.y[size_t(f) * C], &a.hg[size_t(f) * H], p.fcproj_w + size_t(e) * C * H,
                      p.fcproj_b + size_t(e) * C, m, H, C);
  }
  // Each token's experts in the order chosen, so a row's sum never depends on the others.
  for (int n = 0; n < N; ++n) {
    float* o = out + size_t(n) * C;
    std::fill(o, o + C, 0.0f);
    for (int j = 0; j < k; ++j) {
      const int q = a.o.pos[size_t(n) * k + j];
      if (q < 0) continue;
      const float g = r.gate[size_t(n) * k + j];
      const float* y = &a.y[size_t(q) * C];
      for (int i = 0; i < C; ++i) o[i] += g * y[i];
    }
  }
}

void backward(float* dx, float* drouter_w, const ExpertGrads& g, const float* dout, const Acts& a,
              const float* x, const float* router_w, const Experts& p, int C, float aux_scale,
              bool accumulate, Scratch& s) {
  const Routing& r = a.r;
  const int B = r.B, T = r.T, E = r.E, k = r.k, N = B * T, H = 4 * C;
  // The combine: d(expert output row) = gate dout; d(gate) = <expert output row, dout>, turned
  // at once into d(probabilities) through the gates' renormalisation.
  std::vector<float>& dp = s.dlogits;  // [N, E]: d(probabilities), then d(logits)
  std::fill(dp.begin(), dp.end(), 0.0f);
  for (int n = 0; n < N; ++n) {
    const float* d = dout + size_t(n) * C;
    const float* pr = r.probs.data() + size_t(n) * E;
    const int* chosen = r.expert.data() + size_t(n) * k;
    double chosen_sum = 0, weighted = 0;
    float dgate[kMaxTopK];
    for (int j = 0; j < k; ++j) {
      chosen_sum += pr[chosen[j]];
      const int q = a.o.pos[size_t(n) * k + j];
      dgate[j] = 0;
      if (q < 0) continue;
      const float gt = r.gate[size_t(n) * k + j];
      const float* y = &a.y[size_t(q) * C];
      float* dy = &s.dy[size_t(q) * C];
      double dot = 0;
      for (int i = 0; i < C; ++i) dot += double(y[i]) * d[i], dy[i] = gt * d[i];
      dgate[j] = float(dot);
      weighted += double(gt) * dot;
    }
    // gate_j = p_j / sum of the chosen p: d p_c = (d gate_c - sum_j gate_j d gate_j) / sum.
    for (int j = 0; j < k; ++j)
      dp[size_t(n) * E + chosen[j]] += float((dgate[j] - weighted) / chosen_sum);
  }
  // The auxiliary loss: d/dp[n, e] of coef E f_e P_e, averaged over sequences, is E f_e / N.
  for (int n = 0; n < N; ++n) {
    const int* load = r.load.data() + size_t(n / T) * E;
    for (int e = 0; e < E; ++e)
      dp[size_t(n) * E + e] += aux_scale * float(double(E) * load[e] / (double(T) * k) / N);
  }
  // The experts, each over its rows; dy's rows become the experts' input gradients.
  for (int e = 0; e < E; ++e) {
    const int f = a.o.first[size_t(e)], m = a.o.first[size_t(e) + 1] - f;
    float* gw1 = g.fc_w + size_t(e) * H * C;
    float* gb1 = g.fc_b + size_t(e) * H;
    float* gw2 = g.fcproj_w + size_t(e) * C * H;
    float* gb2 = g.fcproj_b + size_t(e) * C;
    if (m == 0) {  // no rows: its gradient is zero
      if (!accumulate) {
        std::fill(gw1, gw1 + size_t(H) * C, 0.0f), std::fill(gb1, gb1 + H, 0.0f);
        std::fill(gw2, gw2 + size_t(C) * H, 0.0f), std::fill(gb2, gb2 + C, 0.0f);
      }
      continue;
    }
    float* dh = &s.dh[size_t(f) * H];
    float* dy = &s.dy[size_t(f) * C];
    L::matmul_backward(dh, gw2, gb2, dy, &a.hg[size_t(f) * H], p.fcproj_w + size_t(e) * C * H, m, H,
                       C, accumulate, false, s.sum.data());
    L::gelu_backward(dh, &a.h[size_t(f) * H], dh, size_t(m) * H);
    L::matmul_backward(dy, gw1, gb1, dh, &a.xin[size_t(f) * C], p.fc_w + size_t(e) * H * C, m, C, H,
                       accumulate, false, s.sum.data());
  }
  for (int n = 0; n < N; ++n) {
    float* d = dx + size_t(n) * C;
    for (int j = 0; j < k; ++j) {
      const int q = a.o.pos[size_t(n) * k + j];
      if (q < 0) continue;
      const float* dxin = &s.dy[size_t(q) * C];
      for (int i = 0; i < C; ++i) d[i] += dxin[i];
    }
  }
  // Softmax: d logits = p (d p - sum p d p); then the router's matmul (no bias).
  for (int n = 0; n < N; ++n) {
    const float* pr = r.probs.data() + size_t(n) * E;
    float* d = dp.data() + size_t(n) * E;
    double dot = 0;
    for (int e = 0; e < E; ++e) dot += double(pr[e]) * d[e];
    for (int e = 0; e < E; ++e) d[e] = float(pr[e] * (d[e] - dot));
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, E, 1.0f, dp.data(), E, router_w, C,
              1.0f, dx, C);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, E, C, N, 1.0f, dp.data(), E, x, C,
              accumulate ? 1.0f : 0.0f, drouter_w, C);
}

}  // namespace gpt::moe
