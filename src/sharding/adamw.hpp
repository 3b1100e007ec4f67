// The sharded updates: torch.optim.AdamW and plain SGD on one contiguous slice of parameters
// this rank owns.
#pragma once

#include <cstddef>
#include <cstdint>

#include "strata/sharding.hpp"

namespace strata::sharding {

/// Updates n parameters in place from their gradient, first and second moments (fp32).
/// `step` counts from 1 (bias correction); `grad_scale` is the clipping factor (1: none).
void adamw_update(const AdamWOptions& o, int64_t step, float grad_scale, float* param,
                  const float* grad, float* m, float* v, size_t n);

/// UpdateRule::sgd on n parameters: param -= lr (grad_scale grad + weight_decay param).
void sgd_update(const AdamWOptions& o, float grad_scale, float* param, const float* grad, size_t n);

/// The factor clip_grad_norm_ applies for a global gradient norm: min(1, max / (norm + 1e-6)).
float clip_factor(const AdamWOptions& o, double norm);

}  // namespace strata::sharding
