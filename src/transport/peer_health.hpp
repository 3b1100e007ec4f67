// Whether a communicator can still complete operations, and if not, whose fault it is. Blocked
// waits consult it (transport/watchdog.hpp); it learns of failures three ways:
//  - a peer on this machine has exited: its process is gone from /proc (checked every 50 ms while
//    something waits; no network needed, so a kill -9 is seen within a wait's next wake-up);
//  - the network says so: UCX failed the endpoint to a peer (connection reset, keepalive), or a
//    peer sent a failure notice;
//  - Communicator::abort() on this rank.
// The rank that detects a failure first tells every other rank (a notice over UCX), so all
// survivors report the same culprit rather than the neighbour they were waiting for. Once failed,
// it stays failed: every later operation reports the same cause.
#pragma once

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/process_id.hpp"
#include "transport/transport.hpp"
#include "transport/watchdog.hpp"

namespace strata::transport {

class PeerHealth final : public transport::Watchdog {
 public:
  PeerHealth(int rank, std::vector<bootstrap::ProcessId> processes);

  /// The transport that carries notices and reports endpoint failures (not owned; may be null).
  /// check() uses it, so it must only run on the thread that currently owns the transport.
  void attach(transport::FailureChannel* transport) { transport_ = transport; }

  void check(const ErrorContext& where) override;
  /// Marks the group failed by this rank's abort() (any thread), for `why` if given; a failure
  /// already recorded stands.
  void abort(const std::string& why = {});
  /// Tells the peers that this rank aborted, `after` the failure that made it (empty: none;
  /// needs the transport, like check()).
  void announce_abort(const std::string& after);
  /// A failure of `culprit` that one of this group's sub-groups saw (the node or rail group of a
  /// hierarchical collective): recorded, unless a failure already stands, and told to every rank,
  /// as "died" when its process is gone from this machine, else as unreachable (`why` says how it
  /// was seen). Needs the transport, like check().
  void report_failure(int culprit, const std::string& why);
  /// Like report_failure, for a sub-group that `culprit` aborted when no better news came.
  void report_abort(int culprit, const std::string& why);
  /// Polls for news of a failure (notices, this machine's processes) until `until`; true once
  /// failed. For a rank whose sub-group was aborted by a neighbour: the neighbour's reason comes
  /// on this group. Needs the transport, like check().
  bool await_news(Clock::time_point until);
  /// True once failed.
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  /// `e`, or when the peer it names is a process of this machine that has exited, an error
  /// saying that this peer died (for failures while the group is being set up); a timeout,
  /// when a rank of this machine is stopped, names that rank (it may not be the peer waited on).
  Error explain(const Error& e) const;
  /// `e` attributed from evidence: a transport error or a peer's failure is often the echo of a
  /// failure elsewhere (a rank that died, whose death a neighbour reports, or a mismatch another
  /// rank found), so news is awaited until `until` (a notice, or a process of this machine gone)
  /// and, when it comes, names the cause; else explain(e). Needs the transport, like check().
  Error attribute(const Error& e, Clock::time_point until);
  /// The failure as an Error at `where` (only when failed()).
  Error failure(const ErrorContext& where) const;

 private:
  /// Records the first failure; later ones are ignored.
  void fail(ErrorCode code, int culprit, const std::string& why);
  void probe();        // the network's news, then this machine's processes
  bool take_notice();  // a notice or endpoint failure, if one came: fails the group with it
  /// False only when rank `r` runs on this machine and has exited.
  bool process_alive(int r) const;
  /// Fails with "rank r died" and tells the other ranks.
  void report_death(int r);

  const int rank_;
  const std::vector<bootstrap::ProcessId> processes_;
  transport::FailureChannel* transport_ = nullptr;
  Clock::time_point next_probe_{};
  // When probe() first saw each rank's process gone (epoch: not seen); see kExitGrace.
  std::vector<Clock::time_point> gone_since_ = std::vector<Clock::time_point>(processes_.size());
  std::atomic<bool> failed_{false};
  mutable std::mutex mu_;
  ErrorCode code_ = ErrorCode::peer_failure;
  int culprit_ = -1;
  std::string why_;
};

}  // namespace strata::transport
