// The immediate path: a small call on one node (an algorithm with a fast path, algo::Now:
// all-reduce on the segment) completes inside the call that issued it.
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

namespace strata {
namespace {

// Polls per peer before the rest is queued: a few microseconds, the spread of ranks that call in
// step. On an oversubscribed node a missing peer is most likely waiting for this core, so each
// poll yields it (16 yields: a few scheduler switches, not a sleep). Measured at 8 bytes, 4 ranks
// on 2 cores, A/B: queueing the rest after 16 pauses took 8.0-11.1 us a call, yielding between
// polls 3.8-4.2 us (Open MPI 5.2-6.1 us in the same runs).
int immediate_polls(const shm::Segment& s) { return s.oversubscribed() ? 16 : 512; }

}  // namespace

std::optional<Work> Communicator::Impl::try_now(const algo::Algorithm& algo, algo::Collective c,
                                                const algo::Args& a) {
  if (!shm_ || config().check) return std::nullopt;
  std::unique_lock<std::mutex> claim = queue_->try_claim();
  if (!claim.owns_lock()) return std::nullopt;
  // Publish first (the hook declines when it would wait: a staging buffer still being read by a
  // peer, or a call too big for its fast path): the bookkeeping below then overlaps the peers'
  // reading of it instead of delaying them (8 B all-reduce, 2 ranks: 250 -> 195 ns a call).
  const algo::Now& now = *algo.now;
  const std::optional<uint64_t> number = now.publish(*shm_, a);
  if (!number) return std::nullopt;
  const algo::Shape& shape = algo::shape(c);
  const auto seq = int64_t(take_seq());
  ErrorContext where{rank, name, shape.name.data(), seq, -1};
  STRATA_LOG(TRACE, "COLL") << shape.name << " seq " << seq << " on " << name << " (immediate)";
  const auto started = Clock::now();
  if (now.try_finish(*shm_, *number, a, immediate_polls(*shm_))) {
    queue_->record_completed(where, a.dtype, a.count, started);
    return Work();
  }
  runtime::Op rest;
  rest.bytes = a.bytes();
  rest.dtype = a.dtype;
  rest.count = a.count;
  rest.reduce = shape.reduces ? int(a.op) : -1;
  rest.where = std::move(where);
  rest.issued_by_all = issued_by_all(uint64_t(seq));
  rest.run = [this, &now, number = *number, a](transport::Transport& w, runtime::Op& self) {
    algo::Exec e{w,          shm_.get(), &write_modes_, levels_.get(), self.deadline,
                 self.where, &w,         &view_};
    now.finish(e, number, a);
  };
  return Work(queue_->finish_later(std::move(rest), started));
}

}  // namespace strata
