// How a buffer is cut into one block per rank: the layouts the reduce-scatter, all-gather and
// all-reduce algorithms (network and shared-memory alike) agree on.
#pragma once

#include <algorithm>
#include <cstddef>

namespace strata::kernels {

/// How a buffer of `total` elements is cut into n contiguous blocks: block i starts at
/// total*i/n, so sizes differ by at most one element and any count works for any n.
struct Blocks {
  size_t total;
  int n;
  size_t offset(int i) const { return total / n * i + std::min<size_t>(i, total % n); }
  size_t count(int i) const { return total / n + (size_t(i) < total % n ? 1 : 0); }
};

/// Equal blocks of `each` elements (reduce_scatter / all_gather layouts).
struct EqualBlocks {
  size_t each;
  size_t offset(int i) const { return each * i; }
  size_t count(int) const { return each; }
};

}  // namespace strata::kernels
