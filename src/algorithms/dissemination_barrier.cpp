// Dissemination barrier: in round k rank r signals r + 2^k and waits for r - 2^k (empty
// messages). After ceil(log2 n) rounds every rank has transitively heard from every other.
// Cost: ceil(log2 n) alpha.
#include "algorithms/algorithms.hpp"

namespace strata::algo {

void dissemination_barrier(P2P& p) {
  const int n = p.size(), r = p.rank();
  uint32_t round = 0;
  for (int k = 1; k < n; k <<= 1, ++round) {
    sendrecv(p, (r + k) % n, nullptr, 0, (r - k + n) % n, nullptr, 0, round);
  }
}

}  // namespace strata::algo
