// Mixture of experts: routing, the experts' MLPs and their backward (moe.hpp says what each
// computes and why capacity is per sequence).
#include "model/moe.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "model/gpt_layers.hpp"
#include "model/model_parallel.hpp"

namespace gpt::moe {

namespace L = layers;

namespace {

// The capacity, per whole sequence and expert: the most probable assignments first, then the
// earlier position, then the earlier choice; the rest dropped. Under cp every rank ranks all
// ranks' assignments of the sequence (gathered) and drops its own.
void drop_over_capacity(Routing& r, int cap, ContextSplit* cp) {
  const int B = r.B, T = r.T, E = r.E, k = r.k, P = cp ? cp->size() : 1, me = cp ? cp->rank() : 0;
  if (std::none_of(r.load.begin(), r.load.end(), [&](int l) { return l > cap; })) return;
  const size_t A = r.expert.size();  // this rank's assignments; every rank holds as many
  std::vector<float> mine(2 * A), every;
  for (size_t s = 0; s < A; ++s) {
    mine[2 * s] = float(r.expert[s]);
    mine[2 * s + 1] = r.probs[s / size_t(k) * size_t(E) + size_t(r.expert[s])];
  }
  if (cp) every.resize(size_t(P) * mine.size()), cp->all_gather(mine, every);
  const float* all = cp ? every.data() : mine.data();
  std::vector<std::tuple<float, int, int, int, int>> ranked;  // (-p, position, j, owner, row)
  for (int b = 0; b < B; ++b) {
    for (int e = 0; e < E; ++e) {
      if (r.load[size_t(b) * E + e] <= cap) continue;
      ranked.clear();
      for (int owner = 0; owner < P; ++owner)
        for (int n = b * T; n < (b + 1) * T; ++n)
          for (int j = 0; j < k; ++j) {
            const float* a = all + 2 * (size_t(owner) * A + size_t(n) * k + size_t(j));
            if (int(a[0]) != e) continue;
            const int t = n - b * T, at = P == 1 ? t : chunk_position(owner, P, t, T);
            ranked.emplace_back(-a[1], at, j, owner, n);
          }
      std::sort(ranked.begin(), ranked.end());
      for (size_t i = size_t(cap); i < ranked.size(); ++i) {
        if (std::get<3>(ranked[i]) != me) continue;
        r.kept[size_t(std::get<4>(ranked[i])) * k + size_t(std::get<2>(ranked[i]))] = 0;
        ++r.dropped;
      }
    }
  }
}

// Every expert on this rank: the rows stay.
class Local final : public Exchange {
 public:
  int size() const override { return 1; }
  void counts(const std::vector<int32_t>& mine, std::vector<int32_t>& theirs) override {
    theirs = mine;
  }
  void rows(const float* send, const std::vector<size_t>& send_rows, float* recv,
            const std::vector<size_t>&, int width) override {
    std::memcpy(recv, send, sizeof(float) * send_rows[0] * size_t(width));
  }
};

Exchange& or_local(Exchange* ex) {
  static thread_local Local local;
  return ex ? *ex : local;
}

// Rows `rows` of `width` floats, from src's row map[q] to dst's row q (or the reverse).
void gather_rows(float* dst, const float* src, const std::vector<int>& map, size_t rows,
                 int width) {
  for (size_t q = 0; q < rows; ++q)
    std::memcpy(dst + q * width, src + size_t(map[q]) * width, sizeof(float) * width);
}
void scatter_rows(float* dst, const float* src, const std::vector<int>& map, size_t rows,
                  int width) {
  for (size_t q = 0; q < rows; ++q)
    std::memcpy(dst + size_t(map[q]) * width, src + q * width, sizeof(float) * width);
}

// The exchange's layout for routing `o` (experts in rank order, El per rank): what goes to each
// rank, what comes from each, and where each of my experts' rows sit among those that came.
// Rows arrive by source rank, each source's by expert; my expert l's rows are taken from every
// source in rank order, so an expert sees its rows in the order one rank holding every token
// would (the ranks' tokens are consecutive slices of the batch).
void lay_out(Acts& a, Exchange& ex) {
  const int P = ex.size(), El = a.E / P;
  a.sent.assign(size_t(a.E), 0);
  for (int e = 0; e < a.E; ++e) a.sent[size_t(e)] = a.o.first[size_t(e) + 1] - a.o.first[size_t(e)];
  for (int j = 0; j < P; ++j)
    a.to_rank[size_t(j)] = size_t(a.o.first[size_t(j + 1) * El] - a.o.first[size_t(j) * El]);
  ex.counts(a.sent, a.from);
  std::vector<size_t> start(size_t(P) + 1, 0);  // each source's first row in recv
  for (int i = 0; i < P; ++i) {
    a.from_rank[size_t(i)] = 0;
    for (int l = 0; l < El; ++l) a.from_rank[size_t(i)] += size_t(a.from[size_t(i) * El + l]);
    start[size_t(i) + 1] = start[size_t(i)] + a.from_rank[size_t(i)];
  }
  a.lfirst.assign(size_t(El) + 1, 0);
  a.perm.resize(start[size_t(P)]);
  size_t q = 0;
  for (int l = 0; l < El; ++l) {
    for (int i = 0; i < P; ++i) {
      size_t at = start[size_t(i)];
      for (int m = 0; m < l; ++m) at += size_t(a.from[size_t(i) * El + m]);
      for (int32_t n = 0; n < a.from[size_t(i) * El + l]; ++n) a.perm[q++] = int(at + size_t(n));
    }
    a.lfirst[size_t(l) + 1] = int(q);
  }
}

}  // namespace

void route(Routing& r, const float* logits, int B, int T, int E, int k, double capacity,
           ContextSplit* cp) {
  const int N = B * T, P = cp ? cp->size() : 1, Tg = T * P;
  r.B = B, r.T = T, r.Tg = Tg, r.E = E, r.k = k;
  r.probs.resize(size_t(N) * E);
  r.expert.resize(size_t(N) * k);
  r.gate.resize(size_t(N) * k);
  r.kept.assign(size_t(N) * k, 1);
  r.dropped = 0;
  // Per sequence and expert: the assignments, then the sum of the probabilities (whole
  // sequences: summed over cp).
  std::vector<double> seq(size_t(B) * E * 2, 0.0);
  for (int n = 0; n < N; ++n) {
    const float* z = logits + size_t(n) * E;
    float* p = r.probs.data() + size_t(n) * E;
    const float mx = *std::max_element(z, z + E);
    double sum = 0;
    for (int e = 0; e < E; ++e) sum += p[e] = std::exp(z[e] - mx);
    for (int e = 0; e < E; ++e) p[e] = float(p[e] / sum);
    for (int e = 0; e < E; ++e) seq[size_t(B + n / T) * E + e] += p[e];
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
      seq[size_t(n / T) * E + best] += 1;
    }
    for (int j = 0; j < k; ++j) r.gate[size_t(n) * k + j] = float(p[chosen[j]] / chosen_sum);
  }
  if (cp) cp->sum(seq);
  r.load.resize(size_t(B) * E);
  for (size_t i = 0; i < r.load.size(); ++i) r.load[i] = int(seq[i]);
  if (capacity > 0) drop_over_capacity(r, int(std::ceil(capacity * Tg * k / E)), cp);
  double aux = 0;
  for (size_t i = 0; i < r.load.size(); ++i)
    aux += double(E) * (double(r.load[i]) / (double(Tg) * k)) * (seq[r.load.size() + i] / Tg);
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

Acts::Acts(int B_, int T_, int C_, int E_, int k_, int ranks_)
    : B(B_),
      T(T_),
      C(C_),
      E(E_),
      k(k_),
      ranks(ranks_),
      logits(size_t(B_) * T_ * E_),
      xin(size_t(B_) * T_ * k_ * C_),
      y(xin.size()),
      recv(xin.size() * size_t(ranks_)),
      ein(recv.size()),
      h(recv.size() * 4),
      hg(h.size()),
      ey(recv.size()),
      to_rank(size_t(ranks_)),
      from_rank(size_t(ranks_)) {}

size_t Acts::bytes() const {
  size_t n = 0;
  for (const auto* v : {&logits, &xin, &y, &recv, &ein, &h, &hg, &ey, &r.probs, &r.gate})
    n += v->size() * sizeof(float);
  return n + (r.expert.size() + o.slot.size() + o.pos.size() + perm.size()) * sizeof(int);
}

Scratch::Scratch(int B, int T, int C, int E, int k, int ranks)
    : dy(size_t(B) * T * k * C),
      drecv(dy.size() * size_t(ranks)),
      dey(drecv.size()),
      dh(drecv.size() * 4),
      dlogits(size_t(B) * T * E),
      sum(size_t(std::max(4 * C, E))) {}

void forward(Acts& a, float* out, const float* x, const float* router_w, const Experts& p,
             double capacity, Exchange* exchange, ContextSplit* cp) {
  Exchange& ex = or_local(exchange);
  Routing& r = a.r;
  const int C = a.C, E = a.E, k = a.k, N = a.B * a.T, H = 4 * C;
  L::matmul_forward(a.logits.data(), x, router_w, nullptr, N, C, E);
  route(r, a.logits.data(), a.B, a.T, E, k, capacity, cp);
  order(a.o, r);
  for (size_t q = 0; q < a.o.slot.size(); ++q)
    std::memcpy(&a.xin[q * C], x + size_t(a.o.slot[q] / k) * C, sizeof(float) * C);
  // Dispatch: the rows to their experts' ranks, then by expert.
  lay_out(a, ex);
  ex.rows(a.xin.data(), a.to_rank, a.recv.data(), a.from_rank, C);
  gather_rows(a.ein.data(), a.recv.data(), a.perm, a.perm.size(), C);
  for (int l = 0; l + 1 < int(a.lfirst.size()); ++l) {
    const int f = a.lfirst[size_t(l)], m = a.lfirst[size_t(l) + 1] - f;
    if (m == 0) continue;
    float* h = &a.h[size_t(f) * H];
    L::matmul_forward(h, &a.ein[size_t(f) * C], p.fc_w + size_t(l) * H * C, p.fc_b + size_t(l) * H,
                      m, C, H);
    L::gelu_forward(&a.hg[size_t(f) * H], h, size_t(m) * H);
    L::matmul_forward(&a.ey[size_t(f) * C], &a.hg[size_t(f) * H], p.fcproj_w + size_t(l) * C * H,
                      p.fcproj_b + size_t(l) * C, m, H, C);
  }
  // Combine: the outputs back to the ranks that sent the rows, in the order they were sent.
  scatter_rows(a.recv.data(), a.ey.data(), a.perm, a.perm.size(), C);
  ex.rows(a.recv.data(), a.from_rank, a.y.data(), a.to_rank, C);
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
              const float* x, const float* router_w, const Experts& p, float aux_scale,
              bool accumulate, Scratch& s, Exchange* exchange) {
  Exchange& ex = or_local(exchange);
  const Routing& r = a.r;
  const int B = r.B, T = r.T, E = r.E, k = r.k, N = B * T, C = a.C, H = 4 * C;
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
  // The auxiliary loss: d/dp[n, e] of coef E f_e P_e, averaged over sequences, is E f_e / N (this
  // rank's rows: under cp each rank's loss is averaged over the cp ranks after).
  for (int n = 0; n < N; ++n) {
    const int* load = r.load.data() + size_t(n / T) * E;
    for (int e = 0; e < E; ++e)
      dp[size_t(n) * E + e] += aux_scale * float(double(E) * load[e] / (double(r.Tg) * k) / N);
  }
  // The rows' gradients to the experts, as the rows went; through each of my experts; back.
  ex.rows(s.dy.data(), a.to_rank, s.drecv.data(), a.from_rank, C);
  gather_rows(s.dey.data(), s.drecv.data(), a.perm, a.perm.size(), C);
  for (int l = 0; l + 1 < int(a.lfirst.size()); ++l) {
    const int f = a.lfirst[size_t(l)], m = a.lfirst[size_t(l) + 1] - f;
    float* gw1 = g.fc_w + size_t(l) * H * C;
    float* gb1 = g.fc_b + size_t(l) * H;
    float* gw2 = g.fcproj_w + size_t(l) * C * H;
    float* gb2 = g.fcproj_b + size_t(l) * C;
    if (m == 0) {  // no rows: its gradient is zero
      if (!accumulate) {
        std::fill(gw1, gw1 + size_t(H) * C, 0.0f), std::fill(gb1, gb1 + H, 0.0f);
        std::fill(gw2, gw2 + size_t(C) * H, 0.0f), std::fill(gb2, gb2 + C, 0.0f);
      }
      continue;
    }
    float* dh = &s.dh[size_t(f) * H];
    float* dy = &s.dey[size_t(f) * C];  // in: d(output rows); out: d(input rows)
    L::matmul_backward(dh, gw2, gb2, dy, &a.hg[size_t(f) * H], p.fcproj_w + size_t(l) * C * H, m, H,
                       C, accumulate, false, s.sum.data());
    L::gelu_backward(dh, &a.h[size_t(f) * H], dh, size_t(m) * H);
    L::matmul_backward(dy, gw1, gb1, dh, &a.ein[size_t(f) * C], p.fc_w + size_t(l) * H * C, m, C, H,
                       accumulate, false, s.sum.data());
  }
  scatter_rows(s.drecv.data(), s.dey.data(), a.perm, a.perm.size(), C);
  ex.rows(s.drecv.data(), a.from_rank, s.dy.data(), a.to_rank, C);
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
