// Intra-node collectives over a shared segment (src/shm/segment.hpp): every rank stages chunks of
// its data in its own slot, peers load them directly and reduce as they read. Chunks are small
// enough to stay in cache between the writer and the readers, so each byte crosses DRAM about once
// on the way in and once on the way out. Counters (written / reduced / consumed) order the phases;
// `depth` staging buffers per rank let a fast rank run ahead while slower ones finish reading.
//
// Per chunk of K bytes, n ranks: all_reduce stages K, reduces K/n from n slots, copies (n-1)K/n
// back; every rank ends with the same bits because sub-block j is reduced only by rank j.
#pragma once

#include "collectives/store_choice.hpp"
#include "shm/segment.hpp"
#include "strata/types.hpp"

namespace strata::coll {

/// Up to this many bytes, all-reduce runs in one phase (every rank reduces everything).
constexpr size_t kShmSmallBytes = 16 * 1024;
/// From this many bytes on, results are written to the caller's buffer with streaming stores
/// (all-reduce: out of place only). Chunks are staged with the stores this rank has found faster
/// (store_choice.hpp).
constexpr size_t kStreamingBytes = 4 * 1024 * 1024;

struct ShmContext {
  shm::Segment& seg;
  Clock::time_point deadline;
  const ErrorContext& where;
  StagingStores& stores;  ///< this rank's learned staging stores on this group
};

void shm_all_reduce(ShmContext c, const void* in, void* out, size_t count, DataType dt,
                    ReduceOp op);
/// All-reduce of up to kShmSmallBytes in one phase, in halves, so that the caller can finish it
/// at once when the peers are already there (comm/immediate.cpp). can_post: post would not wait
/// (up to shm::kLineBytes it never does; above, this rank's next staging buffer must have been
/// read by every peer). post: publishes this rank's input and returns its number.
/// try_finish: reduces every rank's input into `out` if every peer has published a matching one
/// within `polls` polls each (on an oversubscribed node each poll yields the core:
/// sched_yield); false leaves `out` untouched, and finish (which waits, bounded by the deadline,
/// and reports a peer in another collective) completes it. shm_all_reduce runs post then finish.
bool shm_small_all_reduce_can_post(shm::Segment& s, size_t bytes);
uint64_t shm_small_all_reduce_post(ShmContext c, const void* in, size_t count, DataType dt);
bool shm_small_all_reduce_try_finish(shm::Segment& s, uint64_t number, void* out, size_t count,
                                     DataType dt, ReduceOp op, int polls);
void shm_small_all_reduce_finish(ShmContext c, uint64_t number, void* out, size_t count,
                                 DataType dt, ReduceOp op);
/// input: n blocks of `count`; rank r receives block r reduced.
void shm_reduce_scatter(ShmContext c, const void* in, void* out, size_t count, DataType dt,
                        ReduceOp op);
/// output: n blocks of `bytes`; block r is this rank's input (in place when input == block r).
void shm_all_gather(ShmContext c, const void* in, void* out, size_t bytes);
/// input and output: n blocks of `bytes` each.
void shm_all_to_all(ShmContext c, const void* in, void* out, size_t bytes);
void shm_broadcast(ShmContext c, void* buf, size_t bytes, int root);

}  // namespace strata::coll
