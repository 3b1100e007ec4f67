// Ring all-gather.
//
// Schedule: rank r's own block is already in place in `buf`. n-1 steps: at step s rank r forwards
// block (r-s) mod n to r+1 and receives block (r-s-1) mod n from r-1, straight into its place.
// Cost: (n-1) alpha + (n-1)/n B beta; no copies beyond the wire, bandwidth-optimal.
#include "algorithms/algorithms.hpp"

namespace strata::algo {
namespace {

template <typename Layout>
void run(P2P& p, void* buf, const Layout& b, size_t es) {
  const int n = p.size(), r = p.rank();
  auto* base = static_cast<uint8_t*>(buf);
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  for (int s = 0; s < n - 1; ++s) {
    const int sb = ((r - s) % n + n) % n;
    const int rb = ((r - s - 1) % n + n) % n;
    sendrecv(p, next, base + b.offset(sb) * es, b.count(sb) * es, prev, base + b.offset(rb) * es,
             b.count(rb) * es, tags::kRingAllGather.at(uint64_t(s), "ring all_gather"));
  }
}

}  // namespace

void ring_all_gather(P2P& p, void* buf, const Blocks& b, size_t es) { run(p, buf, b, es); }
void ring_all_gather(P2P& p, void* buf, const EqualBlocks& b, size_t es) { run(p, buf, b, es); }

}  // namespace strata::algo
