// What the runtime needs of a transport: the algorithms' P2P for collectives, plus user
// point-to-point messages, progress and sleep for the op queue, and failure notices for peer
// health. One instance per communicator, used by one thread at a time (the op queue's owner).
// Implementations live beside it, one folder each (ucx/: UCX's tagged messages); the runtime
// makes them through their factory (ucx/factory.hpp) and sees no transport's own headers.
#pragma once

#include <cstdint>
#include <optional>

#include "strata/error.hpp"
#include "strata/types.hpp"  // Clock
#include "transport/call_bits.hpp"
#include "transport/p2p.hpp"
#include "transport/watchdog.hpp"

namespace strata::transport {

/// What one rank tells the others when the group cannot go on, so that every survivor names the
/// same culprit instead of blaming the neighbour it happened to wait for.
struct Notice {
  enum Kind : int32_t { died = 1, aborted = 2, unreachable = 3, mismatch = 4, refused = 5 };
  int32_t kind = 0;
  int32_t culprit = -1;   ///< the rank that died, aborted, cannot be reached or called otherwise
  int32_t reporter = -1;  ///< the rank that noticed
  /// mismatch: the reporter's and the culprit's call (call_bits.hpp; the culprit's root and
  /// count -1 when only its message's tag was seen, its bits equal when the sizes differed);
  /// refused (the culprit refused its own arguments): its call.
  Call calls[2];
  /// refused: the culprit's error, cut to fit (read it up to the first NUL or the end).
  char reason[200] = {};
};

class Transport : public P2P {
 public:
  /// Sets the sequence number, error context and deadline that the next collective runs under,
  /// and its call, which its messages carry and check (unless `tagged` is false: STRATA_CHECK's
  /// exchange, which compares calls itself). Throws the mismatch when a message of an earlier
  /// call is found that nobody took (call_history.hpp).
  virtual void begin_collective(uint64_t seq, const ErrorContext& where, Clock::time_point deadline,
                                const Call& call, bool tagged) = 0;
  /// Between operations (nothing runs): answers the peers' questions about earlier calls and
  /// looks for messages of them that nobody took. True when that found a mismatch, which
  /// poll_failure() then reports (the peers have been told).
  virtual bool look_back() = 0;

  /// User point-to-point messages (tags in their own space).
  virtual Request post_send(int peer, const void* data, size_t bytes, uint32_t tag) = 0;
  /// `peer` < 0: from any source; test() sets the request's peer to the sender on completion.
  virtual Request post_recv(int peer, void* data, size_t bytes, uint32_t tag) = 0;
  /// True once `r` completed; throws strata::Error (with `where`) if it failed.
  virtual bool test(Request& r, const ErrorContext& where) = 0;
  /// Cancels an outstanding request and waits (bounded) until the transport lets go of its
  /// buffer.
  virtual void cancel(Request& r) = 0;

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

  /// A failure learnt from the network: a peer's notice, else an endpoint the transport
  /// declared failed (reported as `unreachable` by this rank). Progresses once.
  virtual std::optional<Notice> poll_failure() = 0;
  /// Sends `n` to every peer except this rank and (but for a mismatch) `n.culprit`; best
  /// effort, bounded (200 ms).
  virtual void send_notice(const Notice& n) = 0;
};

}  // namespace strata::transport
