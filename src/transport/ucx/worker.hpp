// UCX host data plane: one ucp worker per communicator (so communicators progress independently),
// endpoints to every peer exchanged through the store, tagged messages, and a wait that spins
// briefly and then sleeps on the worker's event fd so an idle rank does not burn a core.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "transport/p2p.hpp"
#include "transport/watchdog.hpp"
#include "strata/error.hpp"
#include "strata/store.hpp"

namespace strata::ucx {

/// Process-wide UCX context, created on first use and shared by every worker.
class Context {
 public:
  static std::shared_ptr<Context> get();
  ~Context();
  ucp_context_h handle() const { return ctx_; }

 private:
  Context();
  ucp_context_h ctx_ = nullptr;
};

/// What one rank tells the others when the group cannot go on, so that every survivor names the
/// same culprit instead of blaming the neighbour it happened to wait for.
struct Notice {
  enum Kind : int32_t { died = 1, aborted = 2, unreachable = 3 };
  int32_t kind = 0;
  int32_t culprit = -1;   ///< the rank that died, aborted or cannot be reached
  int32_t reporter = -1;  ///< the rank that noticed
};

class Worker final : public transport::P2P {
 public:
  /// Creates the worker and connects to all `size` ranks through `store` (collective). Endpoints
  /// to the peers flagged in `network_watched` report a broken connection (UCX peer error
  /// handling); that mode takes UCX's shared-memory transports away (measured here: 8-byte
  /// latency 1.8 -> 10 us, 8 MiB 6 -> 1.2 GB/s), so peers on this machine, whose death the
  /// process table shows, are not flagged.
  Worker(Store& store, int rank, int size, const std::vector<bool>& network_watched,
         const ErrorContext& where, std::chrono::milliseconds timeout);
  ~Worker() override;

  // transport::P2P, used by algorithms inside one collective (see begin_collective()).
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  transport::Request isend(int peer, const void* data, size_t bytes, uint32_t step) override;
  transport::Request irecv(int peer, void* data, size_t bytes, uint32_t step) override;
  void wait(std::span<transport::Request> requests) override;
  void* scratch(size_t bytes, int slot) override;

  /// Sets the sequence number, error context and deadline that the next collective runs under.
  void begin_collective(uint64_t seq, const ErrorContext& where, Clock::time_point deadline);

  /// User point-to-point messages (tags in their own space).
  transport::Request post_send(int peer, const void* data, size_t bytes, uint32_t tag);
  /// `peer` < 0: from any source; test() sets the request's peer to the sender on completion.
  transport::Request post_recv(int peer, void* data, size_t bytes, uint32_t tag);
  /// True once `r` completed; throws strata::Error (with `where`) if it failed.
  bool test(transport::Request& r, const ErrorContext& where);
  /// Cancels an outstanding request and waits (bounded) until UCX lets go of its buffer.
  void cancel(transport::Request& r);

  /// Drives the worker once; returns true if anything happened.
  bool progress();
  /// Arms the event fd; false when events are already pending (progress again instead).
  bool arm();
  /// Sleeps until the network or wake() signals, or `until` (at most 100 ms). Needs a prior
  /// successful arm(), but not exclusive use of the worker.
  void wait_event(Clock::time_point until);
  /// arm() + wait_event(): for the thread that owns the worker.
  void sleep(Clock::time_point until) {
    if (arm()) wait_event(until);
  }
  /// More ranks on this node than cores: waits poll only briefly (spin_policy.hpp).
  void set_oversubscribed(bool v) { oversubscribed_ = v; }
  bool oversubscribed() const { return oversubscribed_; }
  /// Interrupts sleep() from any thread.
  void wake();
  /// Consults the watchdog (slow paths of every wait; see transport/watchdog.hpp). Not owned.
  void set_watchdog(transport::Watchdog* w) { watchdog_ = w; }

  /// A failure learnt from the network: a peer's notice, else an endpoint UCX declared failed
  /// (reported as `unreachable` by this rank). Progresses the worker once.
  std::optional<Notice> poll_failure();
  /// Sends `n` to every peer except `n.culprit` and this rank; best effort, bounded (200 ms).
  void send_notice(const Notice& n);
  /// The worker's event fd (readable when network events may be pending after arm()).
  int event_fd() const { return event_fd_; }

 private:
  Error failure(ErrorCode code, int peer, const std::string& what) const;
  /// The watchdog says the current operation cannot complete (a peer died, an abort).
  bool group_failed();
  static void on_endpoint_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  bool post_notice_receive();
  /// The tag of the current collective's message from `src` (transport/tags.hpp).
  uint64_t collective_tag(int src, uint32_t step) const;
  transport::Request post(bool recv, int peer, void* data, size_t bytes, uint64_t tag,
                     uint64_t mask = ~uint64_t(0));

  int rank_;
  int size_;
  ucp_worker_h worker_ = nullptr;
  std::shared_ptr<Context> context_;
  std::vector<ucp_ep_h> eps_;
  int event_fd_ = -1;  // the worker's efd
  int wake_fd_ = -1;   // eventfd for wake()
  int epoll_fd_ = -1;
  std::vector<std::unique_ptr<uint8_t[]>> scratch_;
  std::vector<size_t> scratch_size_;
  // State of the collective being run (only touched by the executing thread).
  uint64_t seq_ = 0;
  ErrorContext where_;
  Clock::time_point deadline_;
  bool oversubscribed_ = false;
  transport::Watchdog* watchdog_ = nullptr;
  // Failure notices: one receive from any source, always posted.
  Notice notice_in_;
  Notice notice_out_;
  void* notice_request_ = nullptr;
  std::atomic<int> unreachable_peer_{-1};  // set by on_endpoint_error
  std::atomic<int> unreachable_status_{0};
  std::atomic<bool> failed_{false};  // a notice went out: close endpoints without flushing
  std::vector<std::pair<Worker*, int>> error_args_;  // (this, peer) for each endpoint's handler
};

}  // namespace strata::ucx
