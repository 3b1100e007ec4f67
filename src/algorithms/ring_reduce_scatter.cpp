// Ring reduce-scatter.
//
// Schedule: n-1 steps. At step s rank r sends its running partial of block (r-s-1) mod n to r+1,
// receives the partial of block (r-s-2) mod n from r-1 and adds its own input block to it. After
// the last step rank r holds block r reduced over all ranks (written to `out`; `avg` divided once).
// Cost: (n-1) alpha + (n-1)/n B beta, each link carrying (n-1)/n of the data: bandwidth-optimal.
// Each block is reduced on exactly one rank in one fixed order, so the result is deterministic.
// Blocks move in chunks of kRingChunkBytes, and each chunk is forwarded to the next step as soon
// as it is reduced, so reduction and the transfers of the following chunks overlap.
#include <cstring>
#include <vector>

#include "algorithms/algorithms.hpp"
#include "kernels/reduce_kernels.hpp"

namespace strata::algo {
namespace {

template <typename Layout>
void run(P2P& p, const void* in, void* out, const Layout& b, DataType dt, ReduceOp op) {
  const int n = p.size(), r = p.rank();
  const size_t es = dtype_size(dt);
  auto block = [&](const void* base, int i) {
    return static_cast<const uint8_t*>(base) + b.offset(i) * es;
  };
  if (n == 1) {
    if (out != in) std::memmove(out, in, b.count(0) * es);
    if (op == ReduceOp::avg) kernels::divide_by(out, b.count(0), dt, 1);
    return;
  }
  size_t max_block = 0;
  for (int i = 0; i < n; ++i) max_block = std::max(max_block, b.count(i));
  // Two scratch blocks: step s receives into bufs[s % 2] while step s's sends still read the
  // other one; chunk k of a step is forwarded as soon as it is reduced (the pipeline).
  uint8_t* bufs[2] = {static_cast<uint8_t*>(p.scratch(max_block * es, 0)),
                      static_cast<uint8_t*>(p.scratch(max_block * es, 1))};
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const size_t chunk = std::max<size_t>(1, kRingChunkBytes / es);
  auto chunks = [&](int blk) { return (b.count(blk) + chunk - 1) / chunk; };
  auto chunk_len = [&](int blk, size_t k) { return std::min(chunk, b.count(blk) - k * chunk); };
  auto mod = [&](int x) { return ((x % n) + n) % n; };
  // Tags of two consecutive steps (all that is in flight) differ while 2 * max_chunks fits the
  // range: blocks up to 4 GiB (transport/tags.hpp).
  const size_t max_chunks = (max_block + chunk - 1) / chunk;
  auto tag = [&](int step, size_t k) {
    return tags::kRingReduceScatter.wrapped(uint64_t(step) * max_chunks + k);
  };

  std::vector<Request> sends(chunks(mod(r - 1))), recvs(chunks(mod(r - 2)));
  for (size_t k = 0; k < sends.size(); ++k) {
    sends[k] = p.isend(next, block(in, mod(r - 1)) + k * chunk * es, chunk_len(mod(r - 1), k) * es,
                       tag(0, k));
  }
  for (size_t k = 0; k < recvs.size(); ++k) {
    recvs[k] = p.irecv(prev, bufs[0] + k * chunk * es, chunk_len(mod(r - 2), k) * es, tag(0, k));
  }
  for (int st = 0; st < n - 1; ++st) {
    const int rb = mod(r - st - 2), nb = mod(r - st - 3);  // received now, received next step
    const bool last = st == n - 2;
    uint8_t* rbuf = bufs[st % 2];
    uint8_t* nbuf = bufs[(st + 1) % 2];
    std::vector<Request> next_sends(last ? 0 : chunks(rb)), next_recvs(last ? 0 : chunks(nb));
    // Before receiving into nbuf chunk k, this step's send of chunk k (which reads nbuf on every
    // step but the first) must be complete.
    auto post_next_recv = [&](size_t k) {
      if (k < sends.size()) p.wait({&sends[k], 1});
      next_recvs[k] = p.irecv(prev, nbuf + k * chunk * es, chunk_len(nb, k) * es, tag(st + 1, k));
    };
    for (size_t k = 0; k < recvs.size(); ++k) {
      p.wait({&recvs[k], 1});
      const size_t len = chunk_len(rb, k), off = k * chunk * es;
      void* dst = last ? static_cast<uint8_t*>(out) + off : rbuf + off;
      kernels::reduce(dst, rbuf + off, block(in, rb) + off, len, dt, op);
      if (last) continue;
      next_sends[k] = p.isend(next, rbuf + off, len * es, tag(st + 1, k));
      if (k < next_recvs.size()) post_next_recv(k);
    }
    for (size_t k = recvs.size(); k < next_recvs.size(); ++k) post_next_recv(k);
    p.wait(sends);
    sends = std::move(next_sends);
    recvs = std::move(next_recvs);
  }
  p.wait(sends);
  if (op == ReduceOp::avg) kernels::divide_by(out, b.count(r), dt, n);
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

}  // namespace strata::algo
