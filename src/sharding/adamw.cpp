#include "sharding/adamw.hpp"

#include <cmath>

namespace strata::sharding {

void adamw_update(const AdamWOptions& o, int64_t step, float grad_scale, float* param,
                  const float* grad, float* m, float* v, size_t n) {
  const float bc1 = 1.0f - std::pow(o.beta1, float(step));
  const float bc2 = 1.0f - std::pow(o.beta2, float(step));
  const float decay = 1.0f - o.lr * o.weight_decay;
  for (size_t i = 0; i < n; ++i) {
    const float g = grad[i] * grad_scale;
    param[i] *= decay;  // decoupled weight decay, before the moment update (as torch)
    m[i] = o.beta1 * m[i] + (1.0f - o.beta1) * g;
    v[i] = o.beta2 * v[i] + (1.0f - o.beta2) * g * g;
    const float mhat = m[i] / bc1, vhat = v[i] / bc2;
    param[i] -= o.lr * mhat / (std::sqrt(vhat) + o.eps);
  }
}

void sgd_update(const AdamWOptions& o, float grad_scale, float* param, const float* grad,
                size_t n) {
  for (size_t i = 0; i < n; ++i)
    param[i] -= o.lr * (grad[i] * grad_scale + o.weight_decay * param[i]);
}

float clip_factor(const AdamWOptions& o, double norm) {
  if (o.max_grad_norm <= 0) return 1.0f;
  const float coef = o.max_grad_norm / (float(norm) + 1e-6f);
  return coef < 1.0f ? coef : 1.0f;
}

}  // namespace strata::sharding
