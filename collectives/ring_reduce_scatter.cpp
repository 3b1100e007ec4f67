// Ring reduce-scatter.
//
// Schedule: n-1 steps. At step s rank r sends its running partial of block (r-s-1) mod n to r+1,
// receives the partial of block (r-s-2) mod n from r-1 and adds its own input block to it. After
// the last step rank r holds block r reduced over all ranks (written to `out`; `avg` divided once).
// Cost: (n-1) alpha + (n-1)/n B beta, each link carrying (n-1)/n of the data: bandwidth-optimal.
// Each block is reduced on exactly one rank in one fixed order, so the result is deterministic.
#include <cstring>

#include "collectives/algorithms.hpp"
#include "collectives/reduce_kernels.hpp"

namespace strata::coll {
namespace {

template <typename Layout>
void run(P2P& p, const void* in, void* out, const Layout& b, DataType dt, ReduceOp op) {
  const int n = p.size(), r = p.rank();
  const size_t es = dtype_size(dt);
  auto block = [&](const void* base, int i) { return static_cast<const uint8_t*>(base) + b.offset(i) * es; };
  if (n == 1) {
    if (out != in) std::memmove(out, in, b.count(0) * es);
    if (op == ReduceOp::avg) divide_by(out, b.count(0), dt, 1);
    return;
  }
  size_t max_block = 0;
  for (int i = 0; i < n; ++i) max_block = std::max(max_block, b.count(i));
  // Two scratch blocks: the one being sent and the one being received, swapped each step.
  uint8_t* bufs[2] = {static_cast<uint8_t*>(p.scratch(max_block * es, 0)),
                      static_cast<uint8_t*>(p.scratch(max_block * es, 1))};
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const void* send_ptr = block(in, (r + n - 1) % n);
  size_t send_count = b.count((r + n - 1) % n);
  for (int s = 0; s < n - 1; ++s) {
    const int rb = ((r - s - 2) % n + 2 * n) % n;
    const bool last = s == n - 2;
    uint8_t* rbuf = bufs[s % 2];
    sendrecv(p, next, send_ptr, send_count * es, prev, rbuf, b.count(rb) * es, uint32_t(s));
    void* dst = last ? out : rbuf;
    reduce(dst, rbuf, block(in, rb), b.count(rb), dt, op);
    send_ptr = rbuf;
    send_count = b.count(rb);
  }
  if (op == ReduceOp::avg) divide_by(out, b.count(r), dt, n);
}

}  // namespace

void ring_reduce_scatter(P2P& p, const void* in, void* out, const Blocks& b, DataType dt,
                         ReduceOp op) {
  run(p, in, out, b, dt, op);
}
void ring_reduce_scatter(P2P& p, const void* in, void* out, const EqualBlocks& b, DataType dt,
                         ReduceOp op) {
  run(p, in, out, b, dt, op);
}

}  // namespace strata::coll
