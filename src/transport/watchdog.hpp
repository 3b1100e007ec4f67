// What a blocked wait asks, while it waits, whether the operation can still finish: a peer may
// have died, or the communicator may have been aborted. Transports and the shared-memory path call
// it from their slow (sleeping) loops only, so the fast path never pays for it.
#pragma once

#include "strata/error.hpp"

namespace strata::transport {

class Watchdog {
 public:
  virtual ~Watchdog() = default;
  /// Throws strata::Error (peer_failure or aborted, naming the culprit) when the operation at
  /// `where` cannot complete; returns otherwise. Cheap enough to call every few milliseconds.
  virtual void check(const ErrorContext& where) = 0;
};

}  // namespace strata::transport
