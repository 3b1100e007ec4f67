// Shared-memory reduce-scatter: per chunk, each rank stages its slice of every block; rank r then
// folds the other slots' slices of block r into its own, then writes the result out.
#include <algorithm>
#include <cstring>

#include "kernels/copy_kernel.hpp"
#include "kernels/reduce_kernels.hpp"
#include "shm/collectives.hpp"
#include "shm/sync.hpp"

namespace strata::shm {

void reduce_scatter(Context c, const void* in, void* out, size_t count, DataType dt, ReduceOp op) {
  auto& s = c.seg;
  const int n = s.size(), r = s.rank();
  const size_t es = dtype_size(dt);
  const size_t per_chunk = std::max<size_t>(s.chunk_bytes() / es / n / 16 * 16, 1);
  auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  auto put =
      stream_results(s, n * count * es, count * es) ? kernels::copy_streaming : kernels::copy;
  const Expect e{Kind::reduce_scatter, count * es, call_word(dt, int(op), -1)};
  size_t off = 0;
  do {  // at least one chunk, even of 0 bytes (collectives.hpp)
    const size_t k = std::min(per_chunk, count - off);
    const uint64_t seq = s.next_chunk++;
    wait_buffer_free(s, seq, c.deadline, c.where);
    uint8_t* mine = s.buffer(r, seq);
    for (int j = 0; j < n; ++j)
      kernels::copy(mine + j * k * es, src + (j * count + off) * es, k * es);
    publish_written(s, seq, e);
    for (int j = 0; j < n; ++j) wait_written(s, j, seq, e, c.deadline, c.where);
    // Fold the peers' slices of block r into mine, in my own slot (only I read that slice),
    // then write the result out.
    const size_t o = r * k * es;
    uint8_t* res = mine + o;
    for (int j = 0; j < n; ++j) {
      if (j != r) kernels::reduce(res, res, s.buffer(j, seq) + o, k, dt, op);
    }
    if (op == ReduceOp::avg) kernels::divide_by(res, k, dt, n);
    publish(s, &SlotHeader::consumed, seq + 1);
    put(dst + off * es, res, k * es);
  } while ((off += per_chunk) < count);
}

}  // namespace strata::shm
