#include "transport/peer_health.hpp"

#include <cstring>
#include <string_view>
#include <thread>

#include "base/log.hpp"
#include "transport/calls/call_bits.hpp"
#include "transport/ucx/stale_files.hpp"

namespace strata::transport {
namespace {

constexpr auto kProbeInterval = std::chrono::milliseconds(50);
// A rank that exits right after its last operation has usually sent all this rank still waits
// for (its part of a final barrier or broadcast): operations in flight get this long to finish
// with it before its exit counts as a death. Without it, a clean exit failed a slower peer's
// last collective (seen in CI: gpt_validate_np8, slurm_np4 on 2 oversubscribed cores).
constexpr auto kExitGrace = std::chrono::milliseconds(150);

// An abort notice carries what made the culprit abort, so that a rank that saw nothing of it
// (it was elsewhere, or done) can say why ("rank 1 aborted the communicator after: ...").
Notice abort_notice(int culprit, int reporter, const std::string& after) {
  Notice n{Notice::aborted, int32_t(culprit), int32_t(reporter)};
  const std::string_view prefix = "strata: ";
  const size_t from = after.starts_with(prefix) ? prefix.size() : 0;
  after.copy(n.reason, sizeof n.reason - 1, from);
  return n;
}

}  // namespace

PeerHealth::PeerHealth(int rank, std::vector<bootstrap::ProcessId> processes)
    : rank_(rank), processes_(std::move(processes)) {}

void PeerHealth::fail(ErrorCode code, int culprit, const std::string& why) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (failed_.load()) return;
    code_ = code;
    culprit_ = culprit;
    why_ = why;
    failed_.store(true, std::memory_order_release);
  }
  // A dead rank of this machine may have left UCX's files behind (transport/ucx/stale_files.hpp).
  if (code == ErrorCode::peer_failure) ucx::reclaim_stale_files();
}

Error PeerHealth::failure(const ErrorContext& where) const {
  std::lock_guard<std::mutex> l(mu_);
  ErrorContext w = where;
  w.peer = culprit_;
  return Error(code_, w, why_);
}

void PeerHealth::check(const ErrorContext& where) {
  if (!failed()) {
    const auto now = Clock::now();
    if (now < next_probe_) return;
    next_probe_ = now + kProbeInterval;
    probe();
    if (!failed()) return;
  }
  throw failure(where);
}

void PeerHealth::probe() {
  if (take_notice()) return;
  // Of the ranks whose processes are gone, the one seen gone first: a survivor that failed
  // naming it exits after it.
  const auto now = Clock::now();
  int first = -1;
  for (size_t r = 0; r < processes_.size(); ++r) {
    if (int(r) == rank_ || process_alive(int(r))) continue;
    if (gone_since_[r] == Clock::time_point{}) gone_since_[r] = now;
    if (first < 0 || gone_since_[r] < gone_since_[size_t(first)]) first = int(r);
  }
  if (first < 0) return;
  // A rank that saw a death reports it and only then exits: its notice may still be in flight to
  // us. Take it before blaming that rank (kill_test caught rank 3 naming rank 1, which had exited
  // after reporting rank 2's death).
  for (int round = 0; round < 16; ++round) {
    if (take_notice()) return;
  }
  if (now - gone_since_[size_t(first)] >= kExitGrace) report_death(first);
}

bool PeerHealth::take_notice() {
  // Notices first: a rank that reported a death and then exited is not the culprit, the rank
  // it named is (its notice is delivered before it exits: send_notice waits for completion).
  if (transport_) {
    if (const auto n = transport_->poll_failure()) {
      const std::string who =
          n->culprit == rank_ ? "this rank" : "rank " + std::to_string(n->culprit);
      const std::string by = "(reported by rank " + std::to_string(n->reporter) + ")";
      if (n->kind == transport::Notice::mismatch) {
        // This rank's own finding, between operations (CallCheck::look_back), or another's.
        const std::string found = n->reporter == rank_
                                      ? "collective mismatch: this rank is in "
                                      : "collective mismatch, found by rank " +
                                            std::to_string(n->reporter) + ": it is in ";
        const bool sizes = compatible(n->calls[0], n->calls[1]);  // its message's size differed
        // The peer to name is the other party: the finder, when this rank is the culprit.
        fail(ErrorCode::invalid_argument, n->culprit == rank_ ? n->reporter : n->culprit,
             found + describe_call(n->calls[0]) + ", " + who + " in " + describe_call(n->calls[1]) +
                 (sizes ? " with another count" : ""));
      } else if (n->kind == transport::Notice::refused) {
        const std::string reason(n->reason, strnlen(n->reason, sizeof n->reason));
        fail(ErrorCode::invalid_argument, n->culprit,
             who + " refused its own arguments to " + describe_call(n->calls[0]) + " (" +
                 (reason.empty() ? "see its error" : reason) +
                 "), so the others cannot complete it");
      } else if (n->kind == transport::Notice::counts) {
        const std::string reason(n->reason, strnlen(n->reason, sizeof n->reason));
        fail(ErrorCode::invalid_argument, n->culprit == rank_ ? n->reporter : n->culprit,
             reason + " (found by rank " + std::to_string(n->reporter) + ")");
      } else if (n->kind == transport::Notice::aborted) {
        const std::string reason(n->reason, strnlen(n->reason, sizeof n->reason));
        fail(ErrorCode::aborted, n->culprit,
             who + " aborted the communicator" + (reason.empty() ? "" : " after: " + reason));
      } else if (n->kind == transport::Notice::died) {
        fail(ErrorCode::peer_failure, n->culprit, who + " died " + by);
      } else if (n->reporter != rank_) {
        fail(ErrorCode::peer_failure, n->culprit, who + " is unreachable " + by);
      } else if (!process_alive(n->culprit)) {
        report_death(n->culprit);  // "died" says more than what the network saw
      } else {
        fail(ErrorCode::peer_failure, n->culprit,
             who +
                 " is unreachable: the network failed the connection to it (process or node "
                 "down?)");
        transport_->send_notice(*n);
      }
      return true;
    }
  }
  return false;
}

Error PeerHealth::explain(const Error& e) const {
  const int peer = e.where().peer;
  if (e.code() == ErrorCode::peer_failure || e.code() == ErrorCode::aborted) return e;
  if (e.code() == ErrorCode::timeout) {
    // The peer waited on may itself be waiting on a rank that is stopped: name that one.
    for (size_t r = 0; r < processes_.size(); ++r) {
      if (int(r) == rank_ || !processes_[r].observable() || !processes_[r].stopped()) continue;
      ErrorContext w = e.where();
      w.peer = int(r);
      return Error(ErrorCode::timeout, w,
                   "rank " + std::to_string(r) + " is stopped (its process " +
                       std::to_string(processes_[r].pid) +
                       " on this machine is in state T: SIGSTOP, a debugger?): " + e.what());
    }
  }
  if (peer < 0 || peer >= int(processes_.size()) || process_alive(peer)) return e;
  return Error(ErrorCode::peer_failure, e.where(),
               "rank " + std::to_string(peer) + " died (its process " +
                   std::to_string(processes_[size_t(peer)].pid) +
                   " on this machine has exited): " + e.what());
}

Error PeerHealth::attribute(const Error& e, Clock::time_point until) {
  const bool echo = e.code() == ErrorCode::transport || e.code() == ErrorCode::peer_failure;
  if (echo && await_news(until)) return failure(e.where());
  return explain(e);
}

bool PeerHealth::process_alive(int r) const {
  const auto& p = processes_[size_t(r)];
  return !p.observable() || p.alive();
}

void PeerHealth::report_death(int r) {
  const int64_t pid = processes_[size_t(r)].pid;
  fail(ErrorCode::peer_failure, r,
       "rank " + std::to_string(r) + " died (its process " + std::to_string(pid) +
           " on this machine has exited)");
  STRATA_LOG(WARN, "COLL") << "rank " << r << " (pid " << pid << ") has exited";
  if (transport_) transport_->send_notice({transport::Notice::died, int32_t(r), int32_t(rank_)});
}

void PeerHealth::abort(const std::string& why) {
  fail(ErrorCode::aborted, rank_,
       "communicator aborted by rank " + std::to_string(rank_) + (why.empty() ? "" : ": " + why));
}

void PeerHealth::report_failure(int culprit, const std::string& why) {
  if (failed()) return;
  if (!process_alive(culprit)) {
    report_death(culprit);
    return;
  }
  fail(ErrorCode::peer_failure, culprit,
       "rank " + std::to_string(culprit) + " is unreachable " + why);
  if (transport_)
    transport_->send_notice({transport::Notice::unreachable, int32_t(culprit), int32_t(rank_)});
}

void PeerHealth::report_abort(int culprit, const std::string& why) {
  if (failed()) return;
  fail(ErrorCode::aborted, culprit, "rank " + std::to_string(culprit) + " aborted " + why);
  if (transport_) transport_->send_notice(abort_notice(culprit, rank_, why));
}

bool PeerHealth::await_news(Clock::time_point until) {
  for (;;) {
    probe();
    if (failed() || Clock::now() >= until) return failed();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void PeerHealth::announce_abort(const std::string& after) {
  if (transport_) transport_->send_notice(abort_notice(rank_, rank_, after));
}

}  // namespace strata::transport
