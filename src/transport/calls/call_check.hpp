// The call comparison a transport may offer beside its data plane (docs/architecture.md,
// "Mismatches"): each collective's call (call_bits.hpp) rides in its messages' tags and joins a
// history the peers can ask about (call_history.hpp), and messages of earlier calls that nobody
// took are looked for between operations. A transport that compares nothing (a test's loopback)
// offers none, and the runtime then relies on STRATA_CHECK's exchange alone.
#pragma once

#include "transport/calls/call_bits.hpp"

namespace strata::transport {

class CallCheck {
 public:
  virtual ~CallCheck() = default;
  /// The call of the collective the data plane began last (DataPlane::begin): its messages
  /// carry and check it, unless `tagged` is false (STRATA_CHECK's exchange, which compares calls
  /// itself). Throws the mismatch when a message of an earlier call is found that nobody took.
  virtual void began(const Call& call, bool tagged) = 0;
  /// Between operations (nothing runs): answers the peers' questions about earlier calls and
  /// looks for messages of them that nobody took. True when that found a mismatch, which the
  /// failure channel then reports (the peers have been told).
  virtual bool look_back() = 0;
};

}  // namespace strata::transport
