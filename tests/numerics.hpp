// Comparing float32 results that were computed in different orders (another layout, another
// micro-batching, another BLAS kernel): norm-wise relative errors per tensor, with bounds derived
// from the arithmetic instead of from what one CPU printed. OpenBLAS picks its kernels by CPU, so
// the rounding of every matrix product moves between machines; an element-wise maximum of
// relative differences amplifies that without limit for elements near zero, a norm does not.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "strata/sharding.hpp"
#include "trainer/validate/rounding.hpp"

namespace numerics {

// float32's unit roundoff and the reordering bound (trainer/validate/rounding.hpp: validate
// holds gradient norms to the same bound).
using gpt::kMargin;
using gpt::kUnit;
using gpt::reorder_bound;

/// The bound for the mean of n results (a loss over n tokens) each within `bound`, whose rounding
/// errors are independent: they shrink by sqrt(n), as above.
inline double mean_bound(double bound, double n) { return bound / std::sqrt(std::max(1.0, n)); }

/// ||a - b|| / ||b|| (Euclidean); 0 when both are zero, infinity when only b is or the sizes
/// differ.
inline double rel_l2(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return INFINITY;
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = double(a[i]) - double(b[i]);
    d += e * e, n += double(b[i]) * double(b[i]);
  }
  if (n == 0) return d == 0 ? 0 : INFINITY;
  return std::sqrt(d / n);
}

inline bool bits_equal(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

/// The tensor of a whole model's parameters (laid out back to back in `specs` order) whose rel_l2
/// is the largest, and that value.
struct Worst {
  std::string tensor;
  double rel = 0;
};
inline Worst worst_tensor(std::span<const float> a, std::span<const float> b,
                          const std::vector<strata::TensorSpec>& specs) {
  Worst w;
  size_t at = 0;
  for (const strata::TensorSpec& s : specs) {
    const size_t n = s.numel();
    const double r = at + n <= a.size() && at + n <= b.size()
                         ? rel_l2(a.subspan(at, n), b.subspan(at, n))
                         : INFINITY;
    if (r > w.rel || w.tensor.empty()) w = {s.name, r};
    at += n;
  }
  if (at != a.size() || at != b.size()) w = {"(sizes differ from the specs)", INFINITY};
  return w;
}

}  // namespace numerics
