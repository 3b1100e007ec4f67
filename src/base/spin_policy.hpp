// How long a waiting thread busy-polls before it sleeps. Waking a sleeping thread costs about
// 250 us on the VMs measured (a halted virtual CPU must be woken), far longer than most waits
// inside a collective, so:
//  - a caller blocked in Work::wait(), whose core has nothing else to do, polls for up to
//    STRATA_SPIN_US (default 20 ms);
//  - the progress thread, which shares the cores with the trainer's compute, polls 50 us, unless
//    a caller is blocked waiting on that very communicator (then its core is free: as inline);
//  - with more ranks on the node than cores, polling only delays the peer being waited for, which
//    may be queued behind the poller on its core: no poll at all, the waiter yields at once
//    (sched_yield, kOversubscribedYield) and sleeps only after that. Measured (8-byte all-reduce,
//    4 ranks on 2 cores, A/B in one session): a 2 us poll gave 10.7-14.0 us, yielding at once
//    3.9-8.6 us.
#pragma once

#include <atomic>
#include <chrono>

namespace strata {

/// Marks the calling thread as a caller driving its own wait (set by the engine around drive()).
void set_inline_caller(bool inline_caller);
/// For the progress thread: the count of callers blocked on its communicator.
void set_blocked_callers(const std::atomic<int>* count);
/// On an oversubscribed node, how long a waiter yields its core (sched_yield) after polling and
/// before sleeping: long enough for the peer it waits for to run a scheduler slice.
constexpr std::chrono::microseconds kOversubscribedYield{500};

/// The poll budget for the calling thread.
std::chrono::microseconds spin_budget(bool oversubscribed);

}  // namespace strata
