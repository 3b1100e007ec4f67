// Shared-memory all-gather, all-to-all and broadcast: stage a chunk in my slot, then every reader
// copies what it needs straight out of the writers' slots. No reduction, one copy in, one out;
// or, unstaged (writer_input.hpp), one copy out of the writer's input.
#include <algorithm>
#include <cstring>
#include <optional>

#include "kernels/copy_kernel.hpp"
#include "shm/collectives.hpp"
#include "shm/sync.hpp"
#include "shm/writer_input.hpp"

namespace strata::shm {

void all_gather(Context c, const void* in, void* out, size_t bytes) {
  auto& s = c.seg;
  const int n = s.size(), r = s.rank();
  const size_t per_chunk = s.chunk_bytes();
  auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  CopyFn put = stream_results(s, bytes, n * bytes) ? kernels::copy_streaming : kernels::copy;
  WriterInput input(c, &c.write_modes.all_gather, src, bytes, bytes * n);
  std::shared_ptr<Window> held;
  const Expect e{Kind::all_gather, bytes, c.call};
  size_t off = 0;
  do {  // at least one chunk, even of 0 bytes (collectives.hpp)
    const size_t k = std::min(per_chunk, bytes - off);
    const uint64_t seq = s.next_chunk++;
    wait_buffer_free(c.seg, seq, c.deadline, c.where);
    input.stage(s.buffer(r, seq), src + off, k);
    input.publish(seq, e, off);
    if (dst + r * bytes != src) put(dst + r * bytes + off, src + off, k);
    for (int j = 0; j < n; ++j) {
      if (j == r) continue;
      wait_written(s, j, seq, e, c.deadline, c.where);
      copy_written(s, j, seq, s.buffer(j, seq), 0, {dst + j * bytes, bytes, off, k}, put, held,
                   c.where);
    }
    publish(s, &SlotHeader::consumed, seq + 1);
  } while ((off += per_chunk) < bytes);
  input.finish();
}

// All-to-all rounds span several staging buffers (contiguous): every round all ranks must meet.
// A round as wide as the whole slot (`depth` buffers) cannot be staged until every peer has read
// the one before, so with a core per rank rounds take half the slot and two are in flight (n = 2,
// 4 MiB: 257 -> 207 us; 1 MiB: 65 -> 56 us). With more ranks than cores each meeting costs
// scheduler slices, and there fewer, larger rounds win (benchmarks/RESULTS.md, "Why"): the whole
// slot. A round stops at the slot's end, so its buffers are contiguous; no buffer index is
// skipped, so ranks that disagree on the size still meet on the same chunk numbers and see each
// other's stamps (a size-mismatch error).
void all_to_all(Context c, const void* in, void* out, size_t bytes) {
  auto& s = c.seg;
  const int n = s.size(), r = s.rank();
  const uint64_t depth = uint64_t(s.depth());
  // As wide as the message needs, up to the widest round above: a message that fits one buffer
  // keeps the depth to run ahead into, which back-to-back small all-to-alls need.
  const uint64_t widest = s.oversubscribed() ? depth : std::max<uint64_t>(depth / 2, 1);
  const uint64_t wide =
      std::clamp<uint64_t>((n * bytes + s.chunk_bytes() - 1) / s.chunk_bytes(), 1, widest);
  auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  CopyFn put = stream_results(s, n * bytes, n * bytes) ? kernels::copy_streaming : kernels::copy;
  WriterInput input(c, &c.write_modes.all_to_all, src, n * bytes, n * bytes);
  std::shared_ptr<Window> held;
  const Expect e{Kind::all_to_all, bytes, c.call};
  size_t off = 0;
  do {  // at least one round, even of 0 bytes (collectives.hpp)
    const uint64_t first = s.next_chunk;
    const uint64_t span = std::min(wide, depth - first % depth);
    const uint64_t last = first + span - 1;
    const size_t k =
        std::min(std::max<size_t>(s.chunk_bytes() * span / n / 64 * 64, 1), bytes - off);
    s.next_chunk += span;
    wait_buffer_free(c.seg, last, c.deadline, c.where);
    uint8_t* mine = s.buffer(r, first);
    for (int j = 0; j < n && input.staged(); ++j) {
      if (j != r) input.stage(mine + j * k, src + j * bytes + off, k);
    }
    // Staged, block j of the round is at j * k of the round's buffers; unstaged, reader j finds
    // its block j * bytes after the round's start in the writer's input.
    input.publish(last, e, off);
    put(dst + r * bytes + off, src + r * bytes + off, k);
    for (int j = 0; j < n; ++j) {
      if (j == r) continue;
      wait_written(s, j, last, e, c.deadline, c.where);
      copy_written(s, j, last, s.buffer(j, first) + r * k, r * bytes,
                   {dst + j * bytes, bytes, off, k}, put, held, c.where);
    }
    publish(s, &SlotHeader::consumed, last + 1);
    off += k;
  } while (off < bytes);
  input.finish();
}

// Only the root stages data (or leaves it unstaged: writer_input.hpp), but on the first chunk
// every rank stamps its call and checks every other rank's: ranks that disagree on the root would
// otherwise each write as a root, or read from different roots, and return. That makes the first
// chunk a meeting of all ranks; later chunks wait for the root only (docs/architecture.md,
// "Mismatches"). The root's staging is not learned: timing it alike in every mode would make the
// root wait for its readers, which cost more than any mode gained (RESULTS.md, "Broadcast"); a
// symmetric buffer is read where it lies, and STRATA_SHM_WRITE_MODE may force a mode.
//
// Out of place, the root's input is relayed through its output from 1 MiB (4 MiB with more ranks
// than cores, where a root waiting for its readers takes their core: n = 4 on 2 cores, 1 MiB went
// 394-431 to 463-571 us), where single copy is possible, no mode is forced and the input is no
// symmetric buffer: the root copies each chunk to its output and the readers copy it from there
// (a system call each), so the root makes one copy a chunk instead of two (staging and its
// output). Below that the root publishes its input and copies it to its output chunk by chunk
// while the others read.
namespace {
size_t relay_from_bytes(const Segment& s) { return s.oversubscribed() ? 4 << 20 : 1 << 20; }
}  // namespace

void broadcast(Context c, const void* in, void* out, size_t bytes, int root) {
  auto& s = c.seg;
  const int n = s.size(), r = s.rank();
  const size_t per_chunk = s.chunk_bytes();
  auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  // Every rank probes, as single_copy_possible() settles only once all have.
  const bool relay = bytes >= relay_from_bytes(s) && s.single_copy_possible() && r == root &&
                     src != dst && config().shm_write_mode == ShmWriteMode::learn &&
                     !s.windows().find(src, bytes).id;
  std::optional<WriterInput> input;  // the root's
  if (r == root) input.emplace(c, nullptr, src, bytes, bytes, std::nullopt, relay ? dst : nullptr);
  std::shared_ptr<Window> held;
  const Expect e{Kind::broadcast, bytes, c.call};
  size_t off = 0;
  do {  // at least one chunk, even of 0 bytes (collectives.hpp)
    const size_t k = std::min(per_chunk, bytes - off);
    const uint64_t seq = s.next_chunk++;
    const bool first = off == 0;
    if (r == root || first) wait_buffer_free(c.seg, seq, c.deadline, c.where);
    if (input) {
      input->stage(s.buffer(root, seq), src + off, k);
      input->publish(seq, e, off);
    } else if (first) {
      publish_written(s, seq, e);
    }
    for (int j = 0; j < n; ++j) {
      if (j != r && (first || j == root)) wait_written(s, j, seq, e, c.deadline, c.where);
    }
    if (r != root) {
      copy_written(s, root, seq, s.buffer(root, seq), 0, {dst, bytes, off, k}, kernels::copy, held,
                   c.where);
    } else if (src != dst && !relay) {
      std::memcpy(dst + off, src + off, k);
    }
    publish(s, &SlotHeader::consumed, seq + 1);
  } while ((off += per_chunk) < bytes);
  if (input) input->finish();
}

}  // namespace strata::shm
