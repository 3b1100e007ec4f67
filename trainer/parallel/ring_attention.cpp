// Ring attention (context_parallel.hpp): the keys and values of every rank visit every rank in
// cp steps around the ring; at each step a rank attends its two query chunks to the two key
// chunks it holds, skipping a pair wholly in the future (the balanced layout makes that half the
// pairs on every rank), masking inside a chunk paired with itself. Blocks merge by an online
// softmax: a running max m and sum l per query row, the output rescaled by exp(m_old - m_new)
// whenever the max grows; the backward recomputes each block's probabilities from the row's
// log-sum-exp m + log l, the only state kept.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "parallel/context_parallel.hpp"

namespace gpt {

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kKeysTag = 1, kGradTag = 2;  // keys and values; their gradients
constexpr float kNoMax = -std::numeric_limits<float>::infinity();

// One (query chunk, key chunk) pair of one head: c query rows and c key rows.
struct Pair {
  const float *q, *k, *v;  // q: row stride 3C; k, v: row stride 2C
  int c, hs, C;
  bool diagonal;  // the chunk with itself: key j visible from query t when j <= t
  int last(int t) const { return diagonal ? t : c - 1; }
};

class RingAttention final : public ContextParallel {
 public:
  using ContextParallel::ContextParallel;
  size_t state_floats(int B, int Tl, int, int NH) const override {
    return size_t(B) * size_t(NH) * size_t(Tl);  // each query row's log-sum-exp
  }
  void attention_forward(float* out, float* lse, const float* qkv, int B, int Tl, int C,
                         int NH) override;
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                          const float* lse, int B, int Tl, int C, int NH) override;

 private:
  // Which chunk of the sequence half `half` of `owner`'s positions is.
  int chunk(int owner, int half) const { return half == 0 ? owner : 2 * size() - 1 - owner; }
  // Calls f(pair, query row offset, key row offset, stats offset) for every visible pair of this
  // rank's queries and the keys of `owner` held in kv, head by head.
  template <typename F>
  void for_each_pair(const float* qkv, const float* kv, int owner, int B, int Tl, int C, int NH,
                     F f) const;
  void wait(strata::Work& w) {
    const auto t0 = Clock::now();
    w.wait();
    seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  void forward_pair(const Pair& p, float* o, float* m, float* l);
  void backward_pair(const Pair& p, const float* dy, const float* lse, const double* dsum,
                     float* dq, float* dk, float* dv);

  std::vector<float> kv_[2], dkv_[2], dkv_in_, s_, dp_, m_, l_;
  std::vector<double> dsum_;
};

template <typename F>
void RingAttention::for_each_pair(const float* qkv, const float* kv, int owner, int B, int Tl,
                                  int C, int NH, F f) const {
  const int c = Tl / 2, hs = C / NH;
  for (int qh = 0; qh < 2; ++qh)
    for (int kh = 0; kh < 2; ++kh) {
      const int qc = chunk(rank(), qh), kc = chunk(owner, kh);
      if (kc > qc) continue;  // wholly in the future
      for (int b = 0; b < B; ++b)
        for (int h = 0; h < NH; ++h) {
          const size_t qrow = size_t(b) * Tl + size_t(qh) * c,
                       krow = size_t(b) * Tl + size_t(kh) * c;
          const float* k = kv + krow * 2 * C + size_t(h) * hs;
          const Pair p{qkv + qrow * 3 * C + size_t(h) * hs, k, k + C, c, hs, C, kc == qc};
          f(p, qrow * C + size_t(h) * hs, krow * 2 * C + size_t(h) * hs,
            (size_t(b) * NH + h) * Tl + size_t(qh) * c);
        }
    }
}

void RingAttention::forward_pair(const Pair& p, float* o, float* m, float* l) {
  const int c = p.c;
  float* S = s_.data();
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c, c, p.hs, 1.0f / std::sqrt(float(p.hs)),
              p.q, 3 * p.C, p.k, 2 * p.C, 0.0f, S, c);
  for (int t = 0; t < c; ++t) {
    float* row = S + size_t(t) * c;
    const int last = p.last(t);
    float mx = row[0];
    for (int j = 1; j <= last; ++j) mx = std::max(mx, row[j]);
    const float mnew = std::max(m[t], mx);
    const float keep = m[t] == kNoMax ? 0.0f : std::exp(m[t] - mnew);
    double sum = 0;
    for (int j = 0; j <= last; ++j) sum += row[j] = std::exp(row[j] - mnew);
    std::fill(row + last + 1, row + c, 0.0f);
    l[t] = float(double(l[t]) * keep + sum);
    m[t] = mnew;
    if (keep != 1.0f)
      for (int i = 0; i < p.hs; ++i) o[size_t(t) * p.C + i] *= keep;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c, p.hs, c, 1.0f, S, c, p.v, 2 * p.C, 1.0f,
              o, p.C);
}

void RingAttention::attention_forward(float* out, float* lse, const float* qkv, int B, int Tl,
                                      int C, int NH) {
  const int P = size(), r = rank(), c = Tl / 2;
  const size_t rows = size_t(B) * Tl, stats = size_t(B) * NH * Tl;
  for (auto& k : kv_) k.resize(rows * 2 * C);
  s_.resize(size_t(c) * c);
  m_.assign(stats, kNoMax);
  l_.assign(stats, 0.0f);
  std::fill(out, out + rows * C, 0.0f);
  for (size_t n = 0; n < rows; ++n)
    std::copy_n(qkv + n * 3 * C + C, 2 * C, kv_[0].data() + n * 2 * C);
  for (int s = 0; s < P; ++s) {
    const float* kv = kv_[s % 2].data();
    std::optional<strata::Work> sent, got;
    if (s + 1 < P) {  // the next block travels while this one is attended to
      sent = cp_.send(strata::Buffer{const_cast<float*>(kv), rows * 2 * C}, (r + 1) % P, kKeysTag);
      got = cp_.recv(strata::buffer(kv_[(s + 1) % 2]), (r + P - 1) % P, kKeysTag);
      bytes_ += 4.0 * double(rows) * 2 * C;
    }
    for_each_pair(qkv, kv, (r - s + P) % P, B, Tl, C, NH,
                  [&](const Pair& p, size_t o, size_t, size_t st) {
                    forward_pair(p, out + o, m_.data() + st, l_.data() + st);
                  });
    if (got) wait(*got), wait(*sent);
  }
  const int hs = C / NH;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < Tl; ++t) {
        const size_t st = (size_t(b) * NH + h) * Tl + t;
        float* o = out + (size_t(b) * Tl + t) * C + size_t(h) * hs;
        const float inv = 1.0f / l_[st];
        for (int i = 0; i < hs; ++i) o[i] *= inv;
        lse[st] = m_[st] + std::log(l_[st]);
      }
}

void RingAttention::backward_pair(const Pair& p, const float* dy, const float* lse,
                                  const double* dsum, float* dq, float* dk, float* dv) {
  const int c = p.c;
  const float scale = 1.0f / std::sqrt(float(p.hs));
  float *S = s_.data(), *dP = dp_.data();
  // The block's probabilities again, from the row's log-sum-exp.
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c, c, p.hs, scale, p.q, 3 * p.C, p.k,
              2 * p.C, 0.0f, S, c);
  for (int t = 0; t < c; ++t) {
    float* row = S + size_t(t) * c;
    const int last = p.last(t);
    for (int j = 0; j <= last; ++j) row[j] = std::exp(row[j] - lse[t]);
    std::fill(row + last + 1, row + c, 0.0f);
  }
  // Y = P V: dP = dY V^T, dV += P^T dY; softmax: dS = P (dP - rowsum(dY O)); S = scale Q K^T.
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c, c, p.hs, 1.0f, dy, p.C, p.v, 2 * p.C,
              0.0f, dP, c);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c, p.hs, c, 1.0f, S, c, dy, p.C, 1.0f, dv,
              2 * p.C);
  for (int t = 0; t < c; ++t)
    for (int j = 0; j < c; ++j) {
      const size_t i = size_t(t) * c + j;
      dP[i] = S[i] * float(double(dP[i]) - dsum[t]);
    }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c, p.hs, c, scale, dP, c, p.k, 2 * p.C,
              1.0f, dq, 3 * p.C);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c, p.hs, c, scale, dP, c, p.q, 3 * p.C, 1.0f,
              dk, 2 * p.C);
}

void RingAttention::attention_backward(float* dqkv, const float* dout, const float* qkv,
                                       const float* out, const float* lse, int B, int Tl, int C,
                                       int NH) {
  const int P = size(), r = rank(), c = Tl / 2, hs = C / NH;
  const int next = (r + 1) % P, prev = (r + P - 1) % P;
  const size_t rows = size_t(B) * Tl, width = 2 * size_t(C);
  s_.resize(size_t(c) * c);
  dp_.resize(size_t(c) * c);
  for (auto& k : kv_) k.resize(rows * width);
  for (auto& k : dkv_) k.resize(rows * width);
  dkv_in_.resize(rows * width);
  // rowsum(dY O) per query row and head.
  dsum_.resize(size_t(B) * NH * Tl);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < Tl; ++t) {
        const size_t at = (size_t(b) * Tl + t) * C + size_t(h) * hs;
        double d = 0;
        for (int i = 0; i < hs; ++i) d += double(dout[at + i]) * out[at + i];
        dsum_[(size_t(b) * NH + h) * Tl + t] = d;
      }
  std::fill(dqkv, dqkv + rows * 3 * C, 0.0f);
  for (size_t n = 0; n < rows; ++n)
    std::copy_n(qkv + n * 3 * C + C, width, kv_[0].data() + n * width);
  // Keys travel ahead as in forward; their gradients follow a step behind, each rank adding its
  // part before passing them on, so that after cp steps they reach their owner.
  std::optional<strata::Work> grads_sent[2];
  for (int s = 0; s < P; ++s) {
    const float* kv = kv_[s % 2].data();
    std::optional<strata::Work> sent, got, grads_got;
    if (s + 1 < P) {
      sent = cp_.send(strata::Buffer{const_cast<float*>(kv), rows * width}, next, kKeysTag);
      got = cp_.recv(strata::buffer(kv_[(s + 1) % 2]), prev, kKeysTag);
      bytes_ += 4.0 * double(rows * width);
    }
    if (s > 0) grads_got = cp_.recv(strata::buffer(dkv_in_), prev, kGradTag);
    std::vector<float>& dkv = dkv_[s % 2];
    if (grads_sent[s % 2]) wait(*grads_sent[s % 2]), grads_sent[s % 2].reset();
    std::fill(dkv.begin(), dkv.end(), 0.0f);
    for_each_pair(qkv, kv, (r - s + P) % P, B, Tl, C, NH,
                  [&](const Pair& p, size_t o, size_t k, size_t st) {
                    const size_t qrow = o / size_t(C) * 3 * size_t(C) + o % size_t(C);
                    backward_pair(p, dout + o, lse + st, dsum_.data() + st, dqkv + qrow,
                                  dkv.data() + k, dkv.data() + k + C);
                  });
    if (grads_got) {
      wait(*grads_got);
      for (size_t i = 0; i < dkv.size(); ++i) dkv[i] += dkv_in_[i];
    }
    grads_sent[s % 2] = cp_.send(strata::buffer(dkv), next, kGradTag);
    bytes_ += 4.0 * double(rows * width);
    if (got) wait(*got), wait(*sent);
  }
  // This rank's keys' and values' gradients, home from the last rank that used them.
  strata::Work home = cp_.recv(strata::buffer(dkv_in_), prev, kGradTag);
  wait(home);
  for (size_t n = 0; n < rows; ++n)
    std::copy_n(dkv_in_.data() + n * width, width, dqkv + n * 3 * C + C);
  for (auto& w : grads_sent)
    if (w) wait(*w);
}

}  // namespace

std::unique_ptr<ContextParallel> make_ring_attention(strata::Communicator cp) {
  return std::make_unique<RingAttention>(std::move(cp));
}

}  // namespace gpt
