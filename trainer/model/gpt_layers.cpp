// The reference GPT's kernels (see gpt_layers.hpp for the conventions). Matrix products go through
// OpenBLAS's cblas_sgemm; everything else is plain loops that the compiler vectorises at -O3.
#include "model/gpt_layers.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace gpt::layers {

namespace {

// Writes or adds a double accumulator into a float gradient.
void store_grad(float* g, const double* acc, int n, bool accumulate) {
  if (accumulate) {
    for (int i = 0; i < n; ++i) g[i] = float(double(g[i]) + acc[i]);
  } else {
    for (int i = 0; i < n; ++i) g[i] = float(acc[i]);
  }
}

// tanh as a rational function (the [13/6] minimax approximation Eigen uses for float), clamped
// to |x| <= 7.9 where tanhf is 1 in float anyway. Unlike libm's tanhf it has no branches or
// calls, so the GELU loops vectorise; it is within 4e-7 of tanh everywhere (a few float ulp).
inline float fast_tanh(float x) {
  const float c = 7.90531110763549805f;
  x = std::min(std::max(x, -c), c);  // minps / maxps: no branch
  const float x2 = x * x;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  p = p * x;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  return p / q;
}

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)

}  // namespace

// ---- embeddings --------------------------------------------------------------------------------

void embed_forward(float* out, const int* tokens, const float* wte, const float* wpe, int N, int T,
                   int C, const int* pos) {
  for (int n = 0; n < N; ++n) {
    const float* te = wte + size_t(tokens[n]) * C;
    const float* pe = wpe + size_t(pos ? pos[n % T] : n % T) * C;
    float* o = out + size_t(n) * C;
    for (int i = 0; i < C; ++i) o[i] = te[i] + pe[i];
  }
}

void embed_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int N, int T,
                    int C, bool accumulate, double* scratch, const int* pos, int Tw) {
  if (!pos) Tw = T;
  // Token rows: a scatter-add in position order, so the result is deterministic.
  for (int n = 0; n < N; ++n) {
    if (tokens[n] < 0) continue;
    float* g = dwte + size_t(tokens[n]) * C;
    const float* d = dout + size_t(n) * C;
    for (int i = 0; i < C; ++i) g[i] += d[i];
  }
  // Positions: every sequence contributes to the same rows.
  std::fill(scratch, scratch + size_t(Tw) * C, 0.0);
  for (int n = 0; n < N; ++n) {
    double* acc = scratch + size_t(pos ? pos[n % T] : n % T) * C;
    const float* d = dout + size_t(n) * C;
    for (int i = 0; i < C; ++i) acc[i] += d[i];
  }
  store_grad(dwpe, scratch, Tw * C, accumulate);
}

// ---- LayerNorm ---------------------------------------------------------------------------------

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                       const float* b, int N, int C) {
  for (int n = 0; n < N; ++n) {
    const float* x = inp + size_t(n) * C;
    // Two passes in double: the variance of a row with a large mean stays accurate.
    double m = 0;
    for (int i = 0; i < C; ++i) m += x[i];
    m /= C;
    double v = 0;
    for (int i = 0; i < C; ++i) v += (x[i] - m) * (x[i] - m);
    v /= C;
    const float mf = float(m), s = float(1.0 / std::sqrt(v + 1e-5));
    float* o = out + size_t(n) * C;
    for (int i = 0; i < C; ++i) o[i] = (x[i] - mf) * s * w[i] + b[i];
    mean[n] = mf;
    rstd[n] = s;
  }
}

void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, const float* mean, const float* rstd, int N, int C,
                        bool accumulate, double* scratch) {
  double* dw_acc = scratch;
  double* db_acc = scratch + C;
  std::fill(scratch, scratch + 2 * size_t(C), 0.0);
  for (int n = 0; n < N; ++n) {
    const float* x = inp + size_t(n) * C;
    const float* d = dout + size_t(n) * C;
    float* di = dinp + size_t(n) * C;
    const float m = mean[n], s = rstd[n];
    // y = xhat * w + b with xhat = (x - m) s; dxhat = d * w. Then
    // dx = s * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
    double sum_d = 0, sum_dx = 0;
    for (int i = 0; i < C; ++i) {
      const float xhat = (x[i] - m) * s;
      const float dxhat = d[i] * w[i];
      sum_d += dxhat;
      sum_dx += double(dxhat) * xhat;
      dw_acc[i] += double(d[i]) * xhat;
      db_acc[i] += d[i];
    }
    const float mean_d = float(sum_d / C), mean_dx = float(sum_dx / C);
    for (int i = 0; i < C; ++i) {
      const float xhat = (x[i] - m) * s;
      di[i] += s * (d[i] * w[i] - mean_d - xhat * mean_dx);
    }
  }
  store_grad(dw, dw_acc, C, accumulate);
  store_grad(db, db_acc, C, accumulate);
}

// ---- linear layers -----------------------------------------------------------------------------

void matmul_forward(float* out, const float* inp, const float* w, const float* b, int N, int C,
                    int OC, const float* residual) {
  if (!residual && !b) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, w, C, 0.0f, out,
                OC);
    return;
  }
  // Start from residual + bias, then let sgemm add inp w^T on top (beta = 1): one pass over out.
  for (int n = 0; n < N; ++n) {
    float* o = out + size_t(n) * OC;
    if (residual) {
      const float* r = residual + size_t(n) * OC;
      for (int i = 0; i < OC; ++i) o[i] = r[i] + b[i];
    } else {
      std::memcpy(o, b, sizeof(float) * size_t(OC));
    }
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, w, C, 1.0f, out, OC);
}

void matmul_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                     const float* w, int N, int C, int OC, bool accumulate, bool dinp_add,
                     double* scratch) {
  // dinp[N, C] = dout[N, OC] w[OC, C]
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, w, C,
              dinp_add ? 1.0f : 0.0f, dinp, C);
  // dw[OC, C] = dout^T inp: the sum over the N rows happens inside sgemm.
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C,
              accumulate ? 1.0f : 0.0f, dw, C);
  std::fill(scratch, scratch + OC, 0.0);
  for (int n = 0; n < N; ++n) {
    const float* d = dout + size_t(n) * OC;
    for (int i = 0; i < OC; ++i) scratch[i] += d[i];
  }
  store_grad(db, scratch, OC, accumulate);
}

// ---- causal self-attention ---------------------------------------------------------------------

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(float(hs));
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const float* q = qkv + size_t(b) * T * C3 + size_t(h) * hs;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* a = att + (size_t(b) * NH + h) * T * T;
      // Scores S = scale * Q K^T for every (t, j); the upper triangle is masked below. Computing
      // the whole square in one sgemm beats a triangular loop at these sizes.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, C3, k, C3, 0.0f, a,
                  T);
      for (int t = 0; t < T; ++t) {
        float* row = a + size_t(t) * T;
        float mx = row[0];
        for (int j = 1; j <= t; ++j) mx = std::max(mx, row[j]);
        double sum = 0;
        for (int j = 0; j <= t; ++j) {
          row[j] = std::exp(row[j] - mx);
          sum += row[j];
        }
        const float inv = float(1.0 / sum);
        for (int j = 0; j <= t; ++j) row[j] *= inv;
        for (int j = t + 1; j < T; ++j) row[j] = 0.0f;  // causal mask: no weight on the future
      }
      // Y = P V, written into this head's columns of out.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, v, C3, 0.0f,
                  out + size_t(b) * T * C + size_t(h) * hs, C);
    }
  }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int B,
                        int T, int C, int NH, float* scratch) {
  const int hs = C / NH, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(float(hs));
  float* dp = scratch;  // [T, T]: dP, then dS in place
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const size_t off = size_t(b) * T * C3 + size_t(h) * hs;
      const float *q = qkv + off, *k = q + C, *v = q + 2 * C;
      float *dq = dqkv + off, *dk = dq + C, *dv = dq + 2 * C;
      const float* p = att + (size_t(b) * NH + h) * T * T;
      const float* dy = dout + size_t(b) * T * C + size_t(h) * hs;
      // Y = P V:  dP = dY V^T,  dV = P^T dY.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dy, C, v, C3, 0.0f, dp,
                  T);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, p, T, dy, C, 0.0f, dv,
                  C3);
      // Softmax backward per row: dS_j = P_j (dP_j - sum_i P_i dP_i); zero where masked.
      for (int t = 0; t < T; ++t) {
        const float* pr = p + size_t(t) * T;
        float* d = dp + size_t(t) * T;
        double dot = 0;
        for (int j = 0; j <= t; ++j) dot += double(pr[j]) * d[j];
        const float dotf = float(dot);
        for (int j = 0; j <= t; ++j) d[j] = pr[j] * (d[j] - dotf);
        for (int j = t + 1; j < T; ++j) d[j] = 0.0f;
      }
      // S = scale Q K^T:  dQ = scale dS K,  dK = scale dS^T Q.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, dp, T, k, C3, 0.0f,
                  dq, C3);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, dp, T, q, C3, 0.0f, dk,
                  C3);
    }
  }
}

// ---- GELU --------------------------------------------------------------------------------------

void gelu_forward(float* out, const float* inp, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float u = kGeluScale * (x + 0.044715f * x * x * x);
    out[i] = 0.5f * x * (1.0f + fast_tanh(u));
  }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float u = kGeluScale * (x + 0.044715f * x * x * x);
    const float th = fast_tanh(u);
    // d/dx [0.5 x (1 + tanh u)] = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) du/dx
    const float du = kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
    const float local = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
    dinp[i] = local * dout[i];
  }
}

// ---- softmax cross-entropy ---------------------------------------------------------------------

double crossentropy_forward(float* probs, const float* logits, const int* targets, int N, int V) {
  double total = 0;
  for (int n = 0; n < N; ++n) {
    const float* z = logits + size_t(n) * V;
    float* p = probs + size_t(n) * V;
    float mx = z[0];
    for (int i = 1; i < V; ++i) mx = std::max(mx, z[i]);
    double sum = 0;
    for (int i = 0; i < V; ++i) {
      p[i] = std::exp(z[i] - mx);
      sum += p[i];
    }
    const float inv = float(1.0 / sum);
    for (int i = 0; i < V; ++i) p[i] *= inv;
    // -log softmax(z)[y] = log sum exp(z - mx) - (z[y] - mx), without rounding p[y] first.
    if (targets) total += std::log(sum) - double(z[targets[n]] - mx);
  }
  return total;
}

void crossentropy_backward(float* dlogits, const float* probs, const int* targets, int N, int V,
                           float scale) {
  for (int n = 0; n < N; ++n) {
    const float* p = probs + size_t(n) * V;
    float* d = dlogits + size_t(n) * V;
    for (int i = 0; i < V; ++i) d[i] = scale * p[i];
    if (targets[n] >= 0) d[targets[n]] = scale * (p[targets[n]] - 1.0f);
  }
}

}  // namespace gpt::layers
