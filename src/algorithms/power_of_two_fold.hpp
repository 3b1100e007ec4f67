// The fold that lets power-of-two algorithms (recursive doubling, halving-doubling) run on any
// world size: with p the largest power of two <= n and rem = n - p, each even rank below 2*rem
// hands its vector to the odd rank above it and sits out; the p remaining ranks run the
// algorithm; afterwards unfold() hands the result back. Costs two extra steps when n is not a
// power of two.
#pragma once

#include "algorithms/algorithms.hpp"
#include "strata/types.hpp"

namespace strata::algo {

struct Fold {
  int pow2;   // p
  int rem;    // n - p
  int vrank;  // this rank among the p active ones, or -1 if it sits out
  /// The real rank of active rank v.
  int real(int v) const { return v < rem ? 2 * v + 1 : v + rem; }
};

/// Folds `data` (count elements, reduced with `op`; `tmp` is scratch of the same size). The
/// lower rank's vector is the first operand, so results do not depend on which rank computes.
Fold fold_to_power_of_two(P2P& p, void* data, void* tmp, size_t count, DataType dt, ReduceOp op);
/// Hands the final `data` back to the ranks that sat out.
void unfold(P2P& p, const Fold& f, void* data, size_t bytes);

}  // namespace strata::algo
