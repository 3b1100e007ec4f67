// Binomial-tree reduce.
//
// Schedule: the broadcast tree run backwards. With the root renumbered to 0, vrank v receives and
// folds in the partials of v + 2^j for j = 0, 1, ... while bit j of v is clear, then sends its
// partial to v - 2^k (k its lowest set bit). ceil(log2 n) rounds; the root divides once for avg.
// Cost: ceil(log2 n) (alpha + B beta + B gamma).
#include <cstring>

#include "algorithms/algorithms.hpp"
#include "kernels/reduce_kernels.hpp"

namespace strata::algo {

void binomial_reduce(P2P& p, const void* in, void* out, size_t count, DataType dt, ReduceOp op,
                     int root) {
  const int n = p.size();
  const int v = (p.rank() - root + n) % n;
  const size_t bytes = count * dtype_size(dt);
  auto real = [&](int vr) { return (vr + root) % n; };
  // The running partial lives in `out` on the root and in scratch elsewhere.
  void* acc = v == 0 ? out : p.scratch(bytes, 0);
  void* tmp = p.scratch(bytes, 1);
  if (acc != in) std::memmove(acc, in, bytes);
  for (int mask = 1; mask < n; mask <<= 1) {
    if (v & mask) {
      Request r = p.isend(real(v - mask), acc, bytes, 0);
      p.wait({&r, 1});
      return;
    }
    if (v + mask < n) {
      Request r = p.irecv(real(v + mask), tmp, bytes, 0);
      p.wait({&r, 1});
      kernels::reduce(acc, acc, tmp, count, dt, op);
    }
  }
  if (op == ReduceOp::avg) kernels::divide_by(acc, count, dt, n);
}

}  // namespace strata::algo
