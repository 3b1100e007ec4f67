// The worker's waits: completing a collective's requests within its deadline, asking a silent
// peer for its call, and giving up transfers when the collective or the group fails. The rest of
// the worker: worker.cpp (setup and messages), worker_calls.cpp, worker_notices.cpp,
// worker_close.cpp.
#include <sched.h>

#include <algorithm>
#include <sstream>
#include <utility>

#include "base/spin_policy.hpp"
#include "transport/ucx/worker.hpp"

namespace strata::ucx {
namespace {

// How long a wait blocks before it asks the peer it waits on for its call (call_history.hpp).
constexpr auto kAskAfter = std::chrono::seconds(1);

}  // namespace

bool Worker::group_failed() {
  if (!watchdog_) return false;
  try {
    watchdog_->check(where_);
    return false;
  } catch (const Error&) {
    return true;
  }
}

void Worker::cancel(transport::Request& r) { cancel_by(r, Clock::now() + std::chrono::seconds(5)); }

void Worker::cancel_by(transport::Request& r, Clock::time_point until) {
  if (!r.handle) return;
  ucp_request_cancel(worker_, r.handle);
  // A receive not yet matched ends at once. A transfer under way (a rendezvous send, or a receive
  // being copied) ends when its peer answers, which a dead peer never does: wait for it only
  // while the group is healthy, until `until`.
  while (ucp_request_check_status(r.handle) == UCS_INPROGRESS && Clock::now() < until &&
         !group_failed())
    progress();
  release(r.handle);
  r.handle = nullptr;
}

void Worker::cancel_collective(Clock::time_point until) {
  for (void* h : std::exchange(posted_, {})) {
    transport::Request r;
    r.handle = h;
    cancel_by(r, until);
  }
}

void Worker::release(void* handle) {
  ucp_request_free(handle);
  // The last posted is the likeliest to end last; a handful are posted at a time.
  auto it = std::find(posted_.rbegin(), posted_.rend(), handle);
  if (it != posted_.rend()) {
    *it = posted_.back();
    posted_.pop_back();
  }
}

void Worker::wait(std::span<transport::Request> reqs) {
  auto spin_until = Clock::now() + spin_budget(oversubscribed_);
  // With more ranks than cores, the peer we wait for may need this core: yield it for a while
  // (a reply usually comes within a scheduler slice) before paying the ~250 us of a sleep.
  auto yield_until = spin_until + (oversubscribed_ ? kOversubscribedYield : Clock::duration{});
  // A wait blocked this long asks the peer it waits on for its call: messages of two calls
  // need not meet, so only the calls themselves can tell.
  auto ask_at = spin_until + kAskAfter;
  size_t first_pending = 0;
  uint32_t busy = 0;
  try {
    for (;;) {
      while (first_pending < reqs.size() && test(reqs[first_pending], where_)) ++first_pending;
      if (first_pending == reqs.size()) return;
      // UCX may report progress forever without completing ours (retrying towards a peer that
      // died mid-transfer): look at the deadline and the watchdog every 64 busy rounds too.
      const bool moved = progress();
      if (moved && (++busy & 63) != 0) continue;
      auto now = Clock::now();
      if (now >= deadline_) {
        const auto& r = reqs[first_pending];
        std::ostringstream m;
        m << "timed out waiting to " << (r.is_recv ? "receive " : "send ") << r.bytes << " bytes "
          << (r.is_recv ? "from" : "to") << " peer " << r.peer
          << " (STRATA_TIMEOUT; is that rank alive and in the same collective?)";
        throw failure(ErrorCode::timeout, r.peer, m.str());
      }
      if (watchdog_ && now >= spin_until) watchdog_->check(where_);
      if (now >= ask_at) {
        ask_at = now + kAskAfter;
        answer_.reset();
        ask(reqs[first_pending].peer, seq_);
      }
      if (auto e = answered_mismatch()) throw *e;
      if (moved) continue;
      if (now >= yield_until)
        sleep(deadline_);
      else if (now >= spin_until)
        sched_yield();
    }
  } catch (const Error& e) {
    // The collective failed and with it the group: the destructor need not flush towards a
    // peer that stopped answering (a stopped rank held the survivor's exit 2 s past its bound).
    failed_ = true;
    // One bound for all: 5 s, or 1 s after a timeout, whose peer did not answer for the whole
    // of STRATA_TIMEOUT and will not now (a stopped process holds a rendezvous send for ever).
    const auto until = Clock::now() + (e.code() == ErrorCode::timeout ? std::chrono::seconds(1)
                                                                      : std::chrono::seconds(5));
    for (auto& r : reqs) cancel_by(r, until);
    cancel_collective(until);
    throw;
  } catch (...) {
    for (auto& r : reqs) cancel(r);
    cancel_collective(Clock::now() + std::chrono::seconds(5));
    throw;
  }
}

}  // namespace strata::ucx
