// Shared-memory reduce-scatter: per chunk, each rank stages its slice of every block; rank r then
// reduces the slices of block r from every slot, in rank order, into its output.
#include <algorithm>
#include <cstring>

#include "collectives/reduce_kernels.hpp"
#include "collectives/copy_kernel.hpp"
#include "collectives/shm_collectives.hpp"
#include "collectives/shm_sync.hpp"

namespace strata::coll {

using shm::SlotHeader;
using namespace shm_sync;

void shm_reduce_scatter(ShmContext c, const void* in, void* out, size_t count, DataType dt,
                        ReduceOp op) {
  auto& s = c.seg;
  const int n = s.size(), r = s.rank();
  const size_t es = dtype_size(dt);
  const size_t per_chunk = std::max<size_t>(s.chunk_bytes() / es / n / 16 * 16, 1);
  auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  for (size_t off = 0; off < count; off += per_chunk) {
    const size_t k = std::min(per_chunk, count - off);
    const uint64_t seq = s.next_chunk++;
    if (seq + 1 > uint64_t(s.depth())) wait_all(s, &SlotHeader::consumed, seq + 1 - s.depth(), c.deadline, c.where);
    uint8_t* mine = s.buffer(r, seq);
    for (int j = 0; j < n; ++j) copy(mine + j * k * es, src + (j * count + off) * es, k * es);
    publish(s, &SlotHeader::written, seq + 1);
    wait_all(s, &SlotHeader::written, seq + 1, c.deadline, c.where);
    uint8_t* res = dst + off * es;
    const size_t o = r * k * es;
    if (n == 1) {
      copy(res, mine + o, k * es);
    } else {
      reduce(res, s.buffer(0, seq) + o, s.buffer(1, seq) + o, k, dt, op);
      for (int j = 2; j < n; ++j) reduce(res, res, s.buffer(j, seq) + o, k, dt, op);
    }
    if (op == ReduceOp::avg) divide_by(res, k, dt, n);
    publish(s, &SlotHeader::consumed, seq + 1);
  }
}

}  // namespace strata::coll
