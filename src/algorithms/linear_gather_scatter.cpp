// Linear gather and scatter: the root posts one receive (send) per rank at once and waits for all.
// Cost: (n-1) alpha + (n-1) B beta at the root, which is the bottleneck link either way.
#include <cstring>
#include <vector>

#include "algorithms/algorithms.hpp"

namespace strata::algo {

void linear_gather(P2P& p, const void* in, void* out, size_t bytes, int root) {
  const int n = p.size(), r = p.rank();
  if (r != root) {
    Request req = p.isend(root, in, bytes, 0);
    p.wait({&req, 1});
    return;
  }
  auto* dst = static_cast<uint8_t*>(out);
  std::vector<Request> reqs;
  for (int i = 0; i < n; ++i) {
    if (i != root) reqs.push_back(p.irecv(i, dst + i * bytes, bytes, 0));
  }
  if (dst + root * bytes != in) std::memmove(dst + root * bytes, in, bytes);
  p.wait(reqs);
}

void linear_scatter(P2P& p, const void* in, void* out, size_t bytes, int root) {
  const int n = p.size(), r = p.rank();
  if (r != root) {
    Request req = p.irecv(root, out, bytes, 0);
    p.wait({&req, 1});
    return;
  }
  auto* src = static_cast<const uint8_t*>(in);
  std::vector<Request> reqs;
  for (int i = 0; i < n; ++i) {
    if (i != root) reqs.push_back(p.isend(i, src + i * bytes, bytes, 0));
  }
  if (src + root * bytes != out) std::memmove(out, src + root * bytes, bytes);
  p.wait(reqs);
}

}  // namespace strata::algo
