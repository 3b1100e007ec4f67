// What the runtime needs of a transport, in three parts: the data plane (the algorithms' P2P,
// plus user point-to-point messages), progress and sleep for the op queue, and one channel for
// failure notices (peer health); the call comparison, which a transport may offer, lives in
// calls/. One instance per communicator, used by one thread at a time (the op queue's owner).
// Implementations live beside it, one folder each (ucx/: UCX's tagged messages; solo/: a group of
// one rank); the runtime makes them through their factory.hpp and sees no transport's own headers.
#pragma once

#include <cstdint>
#include <optional>

#include "strata/error.hpp"
#include "strata/types.hpp"  // Clock
#include "transport/calls/call_check.hpp"
#include "transport/p2p.hpp"
#include "transport/watchdog.hpp"

namespace strata::transport {

/// What one rank tells the others when the group cannot go on, so that every survivor names the
/// same culprit instead of blaming the neighbour it happened to wait for.
struct Notice {
  enum Kind : int32_t {
    died = 1,
    aborted = 2,
    unreachable = 3,
    mismatch = 4,
    refused = 5,
    counts = 6  ///< all_to_allv: the reporter received a count the culprit sent, not expected
  };
  int32_t kind = 0;
  int32_t culprit = -1;   ///< the rank that died, aborted, cannot be reached or called otherwise
  int32_t reporter = -1;  ///< the rank that noticed
  /// mismatch: the reporter's and the culprit's call (call_bits.hpp; the culprit's root and
  /// count -1 when only its message's tag was seen, its bits equal when the sizes differed);
  /// refused (the culprit refused its own arguments): its call.
  Call calls[2];
  /// refused: the culprit's error; counts: the disagreement, as the reporter words it;
  /// aborted: the failure that made it abort (may be empty); cut
  /// to fit (read it up to the first NUL or the end).
  char reason[200] = {};
};

/// The data plane: the algorithms' P2P, the collective its messages belong to, and user
/// point-to-point messages. Ten methods: all a transport needs to move a collective's bytes.
class DataPlane : public P2P {
 public:
  /// The collective that the next isend, irecv and wait belong to: its sequence number (which
  /// their tags carry), error context and deadline.
  virtual void begin(uint64_t seq, const ErrorContext& where, Clock::time_point deadline) = 0;
  /// User point-to-point messages (tags in their own space).
  virtual Request post_send(int peer, const void* data, size_t bytes, uint32_t tag) = 0;
  /// `peer` < 0: from any source; test() sets the request's peer to the sender on completion.
  virtual Request post_recv(int peer, void* data, size_t bytes, uint32_t tag) = 0;
  /// True once `r` completed; throws strata::Error (with `where`) if it failed.
  virtual bool test(Request& r, const ErrorContext& where) = 0;
  /// Cancels an outstanding request and waits (bounded) until the transport lets go of its
  /// buffer.
  virtual void cancel(Request& r) = 0;
};

/// Driving the transport and sleeping on it: the op queue's side.
class Progress {
 public:
  virtual ~Progress() = default;
  /// Drives the transport once; returns true if anything happened.
  virtual bool progress() = 0;
  /// Arms the event fd; false when events are already pending (progress again instead).
  virtual bool arm() = 0;
  /// Sleeps until the network or wake() signals, or `until` (at most 100 ms). Needs a prior
  /// successful arm(), but not exclusive use of the transport.
  virtual void wait_event(Clock::time_point until) = 0;
  /// arm() + wait_event(): for the thread that owns the transport.
  void sleep(Clock::time_point until) {
    if (arm()) wait_event(until);
  }
  /// Interrupts sleep() from any thread.
  virtual void wake() = 0;
  /// A file descriptor readable when network events may be pending after arm().
  virtual int event_fd() const = 0;
  /// More ranks on this node than cores: waits poll only briefly (base/spin_policy.hpp).
  virtual void set_oversubscribed(bool v) = 0;
  virtual bool oversubscribed() const = 0;
  /// Consults the watchdog (slow paths of every wait). Not owned.
  virtual void set_watchdog(Watchdog* w) = 0;
};

/// The one channel for failures and mismatch notices: what peer health reads and tells.
class FailureChannel {
 public:
  virtual ~FailureChannel() = default;
  /// A failure learnt from the network: a peer's notice, else an endpoint the transport
  /// declared failed (reported as `unreachable` by this rank). Progresses once.
  virtual std::optional<Notice> poll_failure() = 0;
  /// Sends `n` to every peer except this rank and (but for mismatch and counts) `n.culprit`; best
  /// effort, bounded (200 ms).
  virtual void send_notice(const Notice& n) = 0;
};

/// What the runtime holds: one object serving the three, and its call comparison if it has one.
class Transport : public DataPlane, public Progress, public FailureChannel {
 public:
  /// The transport's call comparison (calls/call_check.hpp); null when it compares none.
  virtual CallCheck* calls() = 0;
};

}  // namespace strata::transport
