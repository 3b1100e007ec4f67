// Recursive-doubling all-reduce, for small messages (latency-bound).
//
// Schedule: after the power-of-two fold (power_of_two_fold.hpp), the p active ranks exchange
// whole vectors with partners at distance 1, 2, 4, ... and fold them in; the unfold hands the
// result to the ranks that sat out.
// Cost: (log2 p + 2 [if n is not a power of two]) (alpha + B beta + B gamma).
// Every fold combines the lower rank's vector with the higher rank's in that order, so partners
// compute the same bits and all ranks end bit-identical.
#include <cstring>

#include "algorithms/algorithms.hpp"
#include "algorithms/power_of_two_fold.hpp"
#include "kernels/reduce_kernels.hpp"

namespace strata::algo {

void recursive_doubling_all_reduce(P2P& p, const void* in, void* out, size_t count, DataType dt,
                                   ReduceOp op) {
  const int n = p.size(), r = p.rank();
  const size_t bytes = count * dtype_size(dt);
  if (out != in) std::memcpy(out, in, bytes);
  void* tmp = p.scratch(bytes, 0);
  const Fold f = fold_to_power_of_two(p, out, tmp, count, dt, op);
  if (f.vrank >= 0) {
    uint32_t step = 1;
    for (int mask = 1; mask < f.pow2; mask <<= 1, ++step) {
      const int partner = f.real(f.vrank ^ mask);
      sendrecv(p, partner, out, bytes, partner, tmp, bytes, step);
      if (partner < r)
        kernels::reduce(out, tmp, out, count, dt, op);
      else
        kernels::reduce(out, out, tmp, count, dt, op);
    }
  }
  unfold(p, f, out, bytes);
  if (op == ReduceOp::avg) kernels::divide_by(out, count, dt, n);
}

}  // namespace strata::algo
