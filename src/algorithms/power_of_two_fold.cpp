#include "algorithms/power_of_two_fold.hpp"

#include "kernels/reduce_kernels.hpp"

namespace strata::algo {

Fold fold_to_power_of_two(P2P& p, void* data, void* tmp, size_t count, DataType dt, ReduceOp op) {
  const int n = p.size(), r = p.rank();
  const size_t bytes = count * dtype_size(dt);
  Fold f{1, 0, -1};
  while (f.pow2 * 2 <= n) f.pow2 *= 2;
  f.rem = n - f.pow2;
  if (r >= 2 * f.rem) {
    f.vrank = r - f.rem;
  } else if (r % 2 == 0) {
    Request s = p.isend(r + 1, data, bytes, tags::kFold.first);
    p.wait({&s, 1});
  } else {
    Request q = p.irecv(r - 1, tmp, bytes, tags::kFold.first);
    p.wait({&q, 1});
    kernels::reduce(data, tmp, data, count, dt, op);
    f.vrank = r / 2;
  }
  return f;
}

void unfold(P2P& p, const Fold& f, void* data, size_t bytes) {
  const int r = p.rank();
  if (r >= 2 * f.rem) return;
  const uint32_t step = tags::kUnfold.first;
  Request q = r % 2 == 1 ? p.isend(r - 1, data, bytes, step) : p.irecv(r + 1, data, bytes, step);
  p.wait({&q, 1});
}

}  // namespace strata::algo
