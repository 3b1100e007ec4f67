// Recursive-doubling all-reduce, for small messages (latency-bound).
//
// Schedule: with p the largest power of two <= n and rem = n - p, ranks below 2*rem pair up
// first: each even one sends its vector to the odd one above it and sits out. The p remaining
// ranks exchange whole vectors with partners at distance 1, 2, 4, ... and fold them in; finally
// the odd ranks hand the result back to their even partners.
// Cost: (log2 p + 2 [if n is not a power of two]) (alpha + B beta + B gamma).
// Every fold combines the lower rank's vector with the higher rank's in that order, so partners
// compute the same bits and all ranks end bit-identical.
#include <cstring>

#include "collectives/algorithms.hpp"
#include "collectives/reduce_kernels.hpp"

namespace strata::coll {

void recursive_doubling_all_reduce(P2P& p, const void* in, void* out, size_t count, DataType dt,
                                   ReduceOp op) {
  const int n = p.size(), r = p.rank();
  const size_t bytes = count * dtype_size(dt);
  if (out != in) std::memcpy(out, in, bytes);
  int pow2 = 1;
  while (pow2 * 2 <= n) pow2 *= 2;
  const int rem = n - pow2;
  void* tmp = p.scratch(bytes, 0);
  // Fold the extra ranks in: even ranks below 2*rem give their vector to rank + 1.
  int vrank;  // rank among the pow2 active ones, or -1
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      Request s = p.isend(r + 1, out, bytes, 0);
      p.wait({&s, 1});
      vrank = -1;
    } else {
      Request q = p.irecv(r - 1, tmp, bytes, 0);
      p.wait({&q, 1});
      reduce(out, tmp, out, count, dt, op);  // lower rank's data first
      vrank = r / 2;
    }
  } else {
    vrank = r - rem;
  }
  if (vrank >= 0) {
    auto real = [&](int v) { return v < rem ? 2 * v + 1 : v + rem; };
    uint32_t step = 1;
    for (int mask = 1; mask < pow2; mask <<= 1, ++step) {
      const int partner = real(vrank ^ mask);
      sendrecv(p, partner, out, bytes, partner, tmp, bytes, step);
      if (partner < r) reduce(out, tmp, out, count, dt, op);
      else reduce(out, out, tmp, count, dt, op);
    }
  }
  // Hand the result back to the ranks that sat out.
  if (r < 2 * rem) {
    if (r % 2 == 1) {
      Request s = p.isend(r - 1, out, bytes, 100);
      p.wait({&s, 1});
    } else {
      Request q = p.irecv(r + 1, out, bytes, 100);
      p.wait({&q, 1});
    }
  }
  if (op == ReduceOp::avg) divide_by(out, count, dt, n);
}

}  // namespace strata::coll
