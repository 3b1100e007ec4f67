#include "model.hpp"

#include <cmath>
#include <cstdio>
#include <string>

namespace shtest {

std::vector<strata::TensorSpec> Mlp::specs() const {
  std::vector<strata::TensorSpec> s;
  for (size_t l = 0; l < layers(); ++l) {
    s.push_back({"layer" + std::to_string(l) + ".w", {dims[l + 1], dims[l]}, int(l)});
    s.push_back({"layer" + std::to_string(l) + ".b", {dims[l + 1]}, int(l)});
  }
  return s;
}

std::vector<float> Mlp::init(size_t t) const {
  const size_t l = t / 2;
  const size_t n = t % 2 ? dims[l + 1] : dims[l + 1] * dims[l];
  std::vector<float> v(n);
  const float scale = 1.0f / std::sqrt(float(dims[l]));
  for (size_t k = 0; k < n; ++k) v[k] = scale * std::sin(1.3f * float(k) + 0.7f * float(t) + 0.1f);
  return v;
}

Batch batch(const Mlp& m, int step, size_t first, size_t count) {
  const size_t din = m.dims.front(), dout = m.dims.back();
  Batch b{count, std::vector<float>(count * din), std::vector<float>(count * dout)};
  for (size_t s = 0; s < count; ++s) {
    const float id = float(size_t(step) * kGlobalBatch + first + s);
    for (size_t i = 0; i < din; ++i) b.x[s * din + i] = std::sin(0.37f * id + 0.91f * float(i));
    for (size_t i = 0; i < dout; ++i)
      b.t[s * dout + i] = 0.5f * std::cos(0.23f * id + 1.7f * float(i));
  }
  return b;
}

void forward_layer(const Mlp& m, size_t l, std::span<const float> W, std::span<const float> b,
                   const std::vector<float>& in, std::vector<float>& out, size_t count) {
  const size_t din = m.dims[l], dout = m.dims[l + 1];
  const bool last = l + 1 == m.layers();
  out.assign(count * dout, 0.0f);
  for (size_t s = 0; s < count; ++s)
    for (size_t o = 0; o < dout; ++o) {
      float z = b[o];
      for (size_t i = 0; i < din; ++i) z += W[o * din + i] * in[s * din + i];
      out[s * dout + o] = last ? z : std::tanh(z);
    }
}

void backward_layer(const Mlp& m, size_t l, std::span<const float> W, const std::vector<float>& a,
                    const std::vector<float>& dz, std::span<float> gW, std::span<float> gb,
                    std::vector<float>& dz_prev, size_t count) {
  const size_t din = m.dims[l], dout = m.dims[l + 1];
  for (float& g : gW) g = 0.0f;
  for (float& g : gb) g = 0.0f;
  for (size_t s = 0; s < count; ++s)
    for (size_t o = 0; o < dout; ++o) {
      gb[o] += dz[s * dout + o];
      for (size_t i = 0; i < din; ++i) gW[o * din + i] += dz[s * dout + o] * a[s * din + i];
    }
  if (l == 0) return;
  dz_prev.assign(count * din, 0.0f);
  for (size_t s = 0; s < count; ++s)
    for (size_t i = 0; i < din; ++i) {
      float g = 0.0f;
      for (size_t o = 0; o < dout; ++o) g += W[o * din + i] * dz[s * dout + o];
      const float act = a[s * din + i];  // a = tanh(z) of layer l-1
      dz_prev[s * din + i] = g * (1.0f - act * act);
    }
}

std::vector<float> loss_grad(const std::vector<float>& y, const Batch& b) {
  std::vector<float> dz(y.size());
  for (size_t k = 0; k < y.size(); ++k) dz[k] = (y[k] - b.t[k]) / float(b.count);
  return dz;
}

std::vector<std::vector<float>> reference(const Mlp& m, const strata::AdamWOptions& o, int steps,
                                          strata::UpdateRule rule) {
  const size_t L = m.layers(), T = 2 * L;
  std::vector<std::vector<float>> p(T), mom(T), vel(T), g(T);
  for (size_t t = 0; t < T; ++t) {
    p[t] = m.init(t);
    mom[t].assign(p[t].size(), 0.0f);
    vel[t].assign(p[t].size(), 0.0f);
    g[t].assign(p[t].size(), 0.0f);
  }
  for (int step = 0; step < steps; ++step) {
    // Full-batch gradient: all kGlobalBatch samples at once.
    Batch b = batch(m, step, 0, kGlobalBatch);
    std::vector<std::vector<float>> acts(L + 1);
    acts[0] = b.x;
    for (size_t l = 0; l < L; ++l)
      forward_layer(m, l, p[2 * l], p[2 * l + 1], acts[l], acts[l + 1], b.count);
    std::vector<float> dz = loss_grad(acts[L], b), dz_prev;
    for (size_t l = L; l-- > 0;) {
      backward_layer(m, l, p[2 * l], acts[l], dz, g[2 * l], g[2 * l + 1], dz_prev, b.count);
      dz.swap(dz_prev);
    }
    // Clipping by the global norm, as torch.nn.utils.clip_grad_norm_.
    if (o.max_grad_norm > 0) {
      double sq = 0;
      for (auto& gt : g)
        for (float x : gt) sq += double(x) * double(x);
      const float norm = float(std::sqrt(sq));
      const float coef = o.max_grad_norm / (norm + 1e-6f);
      if (coef < 1.0f)
        for (auto& gt : g)
          for (float& x : gt) x *= coef;
    }
    if (rule == strata::UpdateRule::sgd) {  // torch.optim.SGD, no momentum
      for (size_t k = 0; k < T; ++k)
        for (size_t i = 0; i < p[k].size(); ++i)
          p[k][i] -= o.lr * (g[k][i] + o.weight_decay * p[k][i]);
      continue;
    }
    // AdamW, as torch.optim.AdamW.
    const int t = step + 1;
    const float bc1 = 1.0f - std::pow(o.beta1, float(t)), bc2 = 1.0f - std::pow(o.beta2, float(t));
    for (size_t k = 0; k < T; ++k)
      for (size_t i = 0; i < p[k].size(); ++i) {
        p[k][i] *= 1.0f - o.lr * o.weight_decay;
        mom[k][i] = o.beta1 * mom[k][i] + (1.0f - o.beta1) * g[k][i];
        vel[k][i] = o.beta2 * vel[k][i] + (1.0f - o.beta2) * g[k][i] * g[k][i];
        const float mhat = mom[k][i] / bc1, vhat = vel[k][i] / bc2;
        p[k][i] -= o.lr * mhat / (std::sqrt(vhat) + o.eps);
      }
  }
  return p;
}

strata::ZeroOptions engine_options(int stage) {
  strata::ZeroOptions o;
  o.stage = stage;
  o.buckets.cap_bytes = 260;
  o.buckets.first_cap_bytes = 100;
  o.adamw.lr = 1e-2f;
  return o;
}

void set_state(const Mlp& m, strata::ZeroEngine& e, const strata::EngineState& st) {
  size_t at = 0;
  for (size_t t = 0; t < m.specs().size(); ++t) {
    const size_t n = m.specs()[t].numel();
    e.set_state(t, std::span(st.params).subspan(at, n), std::span(st.m).subspan(at, n),
                std::span(st.v).subspan(at, n));
    at += n;
  }
  e.set_steps_done(st.steps);
}

std::vector<float> concat(const std::vector<std::vector<float>>& v) {
  std::vector<float> out;
  for (auto& x : v) out.insert(out.end(), x.begin(), x.end());
  return out;
}

std::string compare(std::span<const float> got, std::span<const float> want, double rel) {
  if (got.size() != want.size())
    return "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(double(got[i]) - double(want[i]));
    const double scale = std::max(std::fabs(double(want[i])), 1e-2);
    if (d > rel * scale) {
      char msg[160];
      std::snprintf(msg, sizeof msg, "element %zu of %zu: got %.9g, want %.9g (diff %.3g)", i,
                    got.size(), double(got[i]), double(want[i]), d);
      return msg;
    }
  }
  return "";
}

}  // namespace shtest
