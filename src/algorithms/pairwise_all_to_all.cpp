// Pairwise-exchange all-to-all(v).
//
// Schedule: own block copied locally; then n-1 steps, at step k rank r sends its block for
// (r+k) mod n and receives the block from (r-k) mod n. Each step is one exchange per rank, so no
// link or endpoint is oversubscribed. Cost: (n-1) alpha + (n-1)/n B beta.
// The caller has checked send_counts[rank] == recv_counts[rank].
// Zero-length blocks are still exchanged so that mismatched counts are caught, not hung on.
#include <cstring>

#include "algorithms/algorithms.hpp"

namespace strata::algo {

void pairwise_all_to_allv(P2P& p, const void* in, const size_t* sc, const size_t* sd, void* out,
                          const size_t* rc, const size_t* rd, size_t es) {
  const int n = p.size(), r = p.rank();
  auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  // Own block: a local copy (skipped when empty: the buffers may then be null).
  if (sc[r] > 0) std::memmove(dst + rd[r] * es, src + sd[r] * es, sc[r] * es);
  for (int k = 1; k < n; ++k) {
    const int to = (r + k) % n, from = (r - k + n) % n;
    sendrecv(p, to, src + sd[to] * es, sc[to] * es, from, dst + rd[from] * es, rc[from] * es,
             tags::kFromZero.wrapped(uint64_t(k)));  // one message per pair and direction
  }
}

}  // namespace strata::algo
