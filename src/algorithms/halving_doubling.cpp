// Recursive halving-doubling all-reduce (Rabenseifner), for medium messages.
//
// Schedule: the power-of-two fold (power_of_two_fold.hpp) leaves p = 2^k active ranks. Then a
// reduce-scatter by recursive halving (partners at distance p/2, p/4, ..., 1 swap half of their
// current range and reduce the half they keep) leaves active rank v owning block v, and an
// all-gather by recursive doubling (distance 1, 2, ..., p/2) spreads the blocks back.
// Cost: 2 log2 p alpha + 2 (p-1)/p B beta + (p-1)/p B gamma: latency of a tree, bandwidth of a
// ring. Each block is reduced on one rank in a fixed order, so all ranks end bit-identical.
#include <cstring>

#include "algorithms/algorithms.hpp"
#include "algorithms/power_of_two_fold.hpp"
#include "kernels/reduce_kernels.hpp"

namespace strata::algo {

void halving_doubling_all_reduce(P2P& p, const void* in, void* out, size_t count, DataType dt,
                                 ReduceOp op) {
  const int n = p.size(), r = p.rank();
  const size_t es = dtype_size(dt), bytes = count * es;
  if (out != in) std::memcpy(out, in, bytes);
  auto* data = static_cast<uint8_t*>(out);
  auto* tmp = static_cast<uint8_t*>(p.scratch(bytes, 0));
  const Fold f = fold_to_power_of_two(p, data, tmp, count, dt, op);
  const int v = f.vrank, pow2 = f.pow2;
  if (v >= 0) {
    const Blocks b{count, pow2};
    auto off = [&](int block) { return b.offset(block) * es; };
    int lo = 0, len = pow2;
    uint32_t step = 1;
    for (int mask = pow2 / 2; mask >= 1; mask /= 2, ++step) {  // reduce-scatter by halving
      const int partner = f.real(v ^ mask), half = len / 2;
      const int keep = (v & mask) ? lo + half : lo, give = (v & mask) ? lo : lo + half;
      const size_t keep_bytes = off(keep + half) - off(keep);
      sendrecv(p, partner, data + off(give), off(give + half) - off(give), partner, tmp, keep_bytes,
               step);
      uint8_t* mine = data + off(keep);
      const size_t elems = keep_bytes / es;
      if (partner < r)
        kernels::reduce(mine, tmp, mine, elems, dt, op);
      else
        kernels::reduce(mine, mine, tmp, elems, dt, op);
      lo = keep, len = half;
    }
    if (op == ReduceOp::avg) kernels::divide_by(data + off(v), b.count(v), dt, n);
    for (int mask = 1; mask < pow2; mask *= 2, ++step) {  // all-gather by doubling
      const int partner = f.real(v ^ mask), plo = lo ^ mask;
      sendrecv(p, partner, data + off(lo), off(lo + len) - off(lo), partner, data + off(plo),
               off(plo + len) - off(plo), step);
      lo = std::min(lo, plo), len *= 2;
    }
  }
  unfold(p, f, data, bytes);
}

}  // namespace strata::algo
