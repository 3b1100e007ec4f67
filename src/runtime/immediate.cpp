// The immediate path: a small all-reduce on one node completes inside the call that issued it.
//
// Queued, an 8-byte all-reduce spends about three quarters of its time in bookkeeping: a work
// state, two std::functions, the queue, the flight recorder's three updates, six clock readings
// (profiled: docs/architecture.md, "Immediate path"). When the op queue is idle, the caller instead
// claims the worker, publishes its input (its cache line up to 48 bytes, its next staging buffer
// up to 16 KiB) and polls the peers' for a bounded moment. If every peer is there, it reduces and
// returns a completed Work: no allocation, one lock for the flight record, one clock reading. If
// not, it gives the rest (waiting, with every check of the queued path) to the op queue at the
// front of the queue and returns its Work, so that a call never blocks for more than the poll.
#include "base/config.hpp"
#include "base/log.hpp"
#include "runtime/communicator_impl.hpp"
#include "shm/collectives.hpp"

namespace strata {
namespace {

// Polls per peer before the rest is queued: a few microseconds, the spread of ranks that call in
// step. On an oversubscribed node a missing peer is most likely waiting for this core, so each
// poll yields it (16 yields: a few scheduler switches, not a sleep). Measured at 8 bytes, 4 ranks
// on 2 cores, A/B: queueing the rest after 16 pauses took 8.0-11.1 us a call, yielding between
// polls 3.8-4.2 us (Open MPI 5.2-6.1 us in the same runs).
int immediate_polls(const shm::Segment& s) { return s.oversubscribed() ? 16 : 512; }

}  // namespace

std::optional<Work> Communicator::Impl::small_all_reduce_now(Buffer in, Buffer out, ReduceOp op) {
  if (!shm_ || size < 2 || in.bytes() > shm::kSmallBytes || config().check) return std::nullopt;
  std::unique_lock<std::mutex> claim = queue_->try_claim();
  // A staging buffer still being read by a peer: posting would wait, so queue instead.
  if (!claim.owns_lock() || !shm::small_all_reduce_can_post(*shm_, in.bytes())) {
    return std::nullopt;
  }
  // Publish first (can_post said it will not wait): the bookkeeping below then overlaps the
  // peers' reading of it instead of delaying them (8 B, 2 ranks: 250 -> 195 ns a call).
  shm::Segment& s = *shm_;
  const uint64_t number = shm::small_all_reduce_publish(s, in.data, in.count, in.dtype, op);
  const auto seq = int64_t(coll_seq_.fetch_add(1, std::memory_order_relaxed));
  ErrorContext where{rank, name, "all_reduce", seq, -1};
  STRATA_LOG(TRACE, "COLL") << "all_reduce seq " << seq << " on " << name << " (immediate)";
  const auto now = Clock::now();
  if (shm::small_all_reduce_try_finish(s, number, out.data, in.count, in.dtype, op,
                                       immediate_polls(s))) {
    queue_->record_completed(where, in.dtype, in.count, now);
    return Work();
  }
  runtime::Op rest;
  rest.bytes = in.bytes();
  rest.dtype = in.dtype;
  rest.count = in.count;
  rest.reduce = int(op);
  rest.where = std::move(where);
  rest.run = [this, number, out, count = in.count, dt = in.dtype, op](transport::Transport&,
                                                                      runtime::Op& self) {
    shm::small_all_reduce_finish({*shm_, self.deadline, self.where, write_modes_}, number, out.data,
                                 count, dt, op);
  };
  return Work(queue_->finish_later(std::move(rest), now));
}

}  // namespace strata
