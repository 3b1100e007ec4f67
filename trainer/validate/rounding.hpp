// How far two float32 trainings of the same steps may drift apart when they add the same terms in
// different orders (another layout, another micro-batching, another BLAS kernel): the bound that
// validate holds gradient norms to and the tests hold parameters and losses to.
#pragma once

#include <algorithm>
#include <cmath>

namespace gpt {

/// float32's unit roundoff: the largest relative error of one rounded operation.
inline constexpr double kUnit = 0x1p-24;

/// Bound on the norm-wise relative difference of two float32 results that add the same `terms`
/// terms per element in different orders, compounded over `steps` optimizer steps. Rounding
/// errors are independent and of mean zero, so a sum of n terms is within lambda sqrt(n) u of the
/// exact one, relative to the sum of its |terms|, but with probability 2 exp(-lambda^2 / 2)
/// (Higham and Mary, "A new approach to probabilistic rounding error analysis", SISC 2019; the
/// worst case n u is never approached). kMargin = lambda 8 (2e-14) x 2 (two orders, each off the
/// exact sum) x 4 (sum |x| / |sum x|, norm-wise over a tensor). A planted error (a wrong slice,
/// a skipped reduction) stays 22x to 7,000x above it (Planted.*, tests/trainer/parallel_test.cpp).
inline constexpr double kMargin = 64;
inline double reorder_bound(double terms, double steps = 1) {
  return kMargin * std::sqrt(std::max(1.0, terms)) * steps * kUnit;
}

}  // namespace gpt
