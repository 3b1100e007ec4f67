// Synchronisation over a shared segment: publishing a counter and waiting for peers' counters.
// A waiting rank spins briefly (the peer is usually a few hundred nanoseconds behind), then sleeps
// on a futex until the counter moves: with more ranks than cores, a waiting rank must give its
// core to the rank it waits for, and sched_yield loops measured 90% system time at 8 ranks on 2
// cores. The deadline bounds every wait.
#pragma once

#include <string>

#include "shm/segment.hpp"

namespace strata::coll::shm_sync {

using Field = strata::shm::Counter strata::shm::SlotHeader::*;

/// Sets this rank's counter `f` to `value` and wakes peers sleeping on it.
void publish(strata::shm::Segment& s, Field f, uint64_t value);

/// Waits until `rank`'s counter reaches `value`; throws (timeout, naming the peer) at `deadline`.
void wait_for(strata::shm::Segment& s, int rank, Field f, uint64_t value,
              Clock::time_point deadline, const ErrorContext& where);

/// Waits until every rank's counter reaches `value`.
inline void wait_all(strata::shm::Segment& s, Field f, uint64_t value, Clock::time_point deadline,
                     const ErrorContext& where) {
  for (int j = 0; j < s.size(); ++j) wait_for(s, j, f, value, deadline, where);
}

}  // namespace strata::coll::shm_sync
