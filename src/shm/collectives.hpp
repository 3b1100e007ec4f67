// Intra-node collectives over a shared segment (src/shm/segment.hpp): every rank stages chunks of
// its data in its own slot, peers load them directly and reduce as they read. Chunks are small
// enough to stay in cache between the writer and the readers, so each byte crosses DRAM about once
// on the way in and once on the way out. Counters (written / reduced / consumed) order the phases;
// `depth` staging buffers per rank let a fast rank run ahead while slower ones finish reading.
//
// Per chunk of K bytes, n ranks: all_reduce stages K, reduces K/n from n slots, copies (n-1)K/n
// back; every rank ends with the same bits because sub-block j is reduced only by rank j.
//
// A call of 0 bytes still stages one (empty) chunk and meets its peers: its stamp is how a peer
// in a non-empty call finds the mismatch, where returning at once would leave that peer to take
// this rank's next call's data.
#pragma once

#include "shm/segment.hpp"
#include "shm/write_mode.hpp"
#include "strata/types.hpp"

namespace strata::shm {

/// Up to this many bytes, all-reduce runs in one phase (every rank reduces everything).
constexpr size_t kSmallBytes = 16 * 1024;
/// Results go to the caller's buffer with streaming stores when the operation's footprint on the
/// node, every rank's input and output, exceeds half the last-level cache (Segment::cache_bytes;
/// half, because the cores beside ours, other processes and other VMs, use it too): below it the
/// output stays cached for whatever reads it next; above it ordinary stores would evict the rest
/// and read every line before writing it. Measured here (32 MiB shared): footprints of 12-16 MiB
/// were faster with ordinary stores (all-to-all n = 2, 4 MiB: 0.80 -> 0.91x Open MPI; all-gather
/// 1.02 -> 1.33x), 20 MiB and up with streaming ones (all-gather n = 4, 4 MiB: 2.07x streaming,
/// 1.29x not; 64 MiB all-to-all: 1.63x against 1.21x). Chunks are staged in the write mode this
/// rank has found faster (write_mode.hpp).
inline bool stream_results(const Segment& s, size_t in_bytes, size_t out_bytes) {
  return double(s.size()) * double(in_bytes + out_bytes) > double(s.cache_bytes()) / 2;
}

struct Context {
  shm::Segment& seg;
  Clock::time_point deadline;
  const ErrorContext& where;
  StagingWriteModes& write_modes;  ///< this rank's learned write modes on this group
  /// Data movement: call_word (sync.hpp) of its dtype and root, which it does not otherwise
  /// see. Reductions make theirs from their own arguments.
  uint32_t call = 0;
};

void all_reduce(Context c, const void* in, void* out, size_t count, DataType dt, ReduceOp op);
/// All-reduce of up to kSmallBytes in one phase, in halves, so that the caller can finish it
/// at once when the peers are already there (runtime/immediate.cpp). can_post: post would not wait
/// (up to shm::kLineBytes it never does; above, this rank's next staging buffer must have been
/// read by every peer; false for a call all_reduce runs otherwise: over kSmallBytes, or alone).
/// post: publishes this rank's input and returns its number; publish does the same without waiting,
/// once can_post said it would not. try_finish: reduces every rank's input into `out` if every peer
/// has published a matching one within `polls` polls each (on an oversubscribed node each poll
/// yields the core: sched_yield); false leaves `out` untouched, and finish (which waits, bounded by
/// the deadline, and reports a peer in another collective) completes it. all_reduce runs post then
/// finish.
bool small_all_reduce_can_post(shm::Segment& s, size_t bytes);
uint64_t small_all_reduce_post(Context c, const void* in, size_t count, DataType dt, ReduceOp op);
uint64_t small_all_reduce_publish(shm::Segment& s, const void* in, size_t count, DataType dt,
                                  ReduceOp op);
bool small_all_reduce_try_finish(shm::Segment& s, uint64_t number, void* out, size_t count,
                                 DataType dt, ReduceOp op, int polls);
void small_all_reduce_finish(Context c, uint64_t number, void* out, size_t count, DataType dt,
                             ReduceOp op);
/// input: n blocks of `count`; rank r receives block r reduced.
void reduce_scatter(Context c, const void* in, void* out, size_t count, DataType dt, ReduceOp op);
/// output: n blocks of `bytes`; block r is this rank's input (in place when input == block r).
void all_gather(Context c, const void* in, void* out, size_t bytes);
/// input and output: n blocks of `bytes` each.
void all_to_all(Context c, const void* in, void* out, size_t bytes);
/// Counts and displacements in elements of `esize` bytes, one each per rank, as
/// Communicator::all_to_allv takes them; ranks whose counts disagree (rank i sends k elements to
/// rank j, which expects another number) fail on every rank, naming the pair.
void all_to_allv(Context c, const void* in, const size_t* send_counts, const size_t* send_displs,
                 void* out, const size_t* recv_counts, const size_t* recv_displs, size_t esize);
/// `in` is read on the root only (in place when it is `out`).
void broadcast(Context c, const void* in, void* out, size_t bytes, int root);

}  // namespace strata::shm
