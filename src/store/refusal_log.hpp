// The store server's log of refused connections. A hostile or broken client may be refused
// thousands of times a second; one WARN line each would drown the job's log and slow the server.
// So the first refusal of each cause is logged with its details, later ones of the same cause are
// only counted, and the counts are logged at most once a minute and when the server stops.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "strata/types.hpp"

namespace strata::store {

/// Why the server closed a connection it did not want.
enum class Refusal {
  malformed,    // a frame that does not parse, or one out of place
  wrong_token,  // HELLO with another job's token
  silent,       // no HELLO within the deadline
  cut_short,    // closed in the middle of a frame
  flooding,     // kept sending while its request was pending
  crowded_out,  // unauthenticated, and the oldest when too many were
  full,         // the server holds as many connections as it may
  internal,     // the server failed serving it
};
constexpr size_t kRefusals = 8;

class RefusalLog {
 public:
  /// Counts one refusal of `peer` for `cause`; logs it when it is the first of its cause.
  void refused(Refusal cause, const std::string& peer, const std::string& detail);
  /// Logs the counts not yet logged, if the last summary is a minute old (or `now_or_never`).
  void summarize(Clock::time_point now, bool now_or_never = false);

 private:
  std::array<uint64_t, kRefusals> unlogged_{};
  std::array<bool, kRefusals> seen_{};
  Clock::time_point last_summary_ = Clock::now();
};

}  // namespace strata::store
