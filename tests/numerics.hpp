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

namespace numerics {

/// float32's unit roundoff: the largest relative error of one rounded operation.
inline constexpr double kUnit = 0x1p-24;

/// Bound on the norm-wise relative difference of two float32 results that add the same `terms`
/// terms per element in different orders, compounded over `steps` optimizer steps. Rounding
/// errors are independent and of mean zero, so a sum of n terms is within lambda sqrt(n) u of the
/// exact one, relative to the sum of its |terms|, but with probability 2 exp(-lambda^2 / 2)
/// (Higham and Mary, "A new approach to probabilistic rounding error analysis", SISC 2019; the
/// worst case n u is never approached). kMargin = lambda 8 (2e-14) x 2 (two orders, each off the
/// exact sum) x 4 (sum |x| / |sum x|, norm-wise over a tensor). A planted error (a wrong slice,
/// a skipped reduction) stays 22x to 7,000x above it (Planted.*, trainer/parallel_test.cpp).
inline constexpr double kMargin = 64;
inline double reorder_bound(double terms, double steps = 1) {
  return kMargin * std::sqrt(std::max(1.0, terms)) * steps * kUnit;
}

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
