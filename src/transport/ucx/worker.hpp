// UCX host data plane: one ucp worker per communicator of two or more ranks (so communicators
// progress independently), endpoints to every peer exchanged through the store, tagged messages,
// and a wait that spins briefly and then sleeps on the worker's event fd so an idle rank does not
// burn a core.
#pragma once

#include <ucp/api/ucp.h>

#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/error.hpp"
#include "strata/store.hpp"
#include "transport/calls/call_history.hpp"
#include "transport/tags.hpp"
#include "transport/transport.hpp"
#include "transport/ucx/context.hpp"

namespace strata::ucx {

using transport::Notice;

class Worker final : public transport::Transport, public transport::CallCheck {
 public:
  /// Creates the worker and connects to all `size` ranks through `store` (collective). Endpoints
  /// to the peers flagged in `network_watched` report a broken connection (UCX peer error
  /// handling); that mode takes UCX's shared-memory transports away (measured here: 8-byte
  /// latency 1.8 -> 10 us, 8 MiB 6 -> 1.2 GB/s), so peers on this machine, whose death the
  /// process table shows, are not flagged.
  /// `one_node`: every rank of the job is on this node, and UCX is kept to loopback (scope.hpp).
  Worker(Store& store, int rank, int size, const std::vector<bool>& network_watched, bool one_node,
         const ErrorContext& where, std::chrono::milliseconds timeout);
  ~Worker() override;

  // transport::P2P, used by algorithms inside one collective (see begin()).
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  transport::Request isend(int peer, const void* data, size_t bytes, uint32_t step) override;
  transport::Request irecv(int peer, void* data, size_t bytes, uint32_t step) override;
  void wait(std::span<transport::Request> requests) override;

  // transport::Transport, used by the op queue and peer health.
  void begin(uint64_t seq, const ErrorContext& where, Clock::time_point deadline) override;
  transport::CallCheck* calls() override { return this; }
  // transport::CallCheck.
  void began(const transport::Call& call, bool tagged) override;
  bool look_back() override;
  transport::Request post_send(int peer, const void* data, size_t bytes, uint32_t tag) override;
  transport::Request post_recv(int peer, void* data, size_t bytes, uint32_t tag) override;
  bool test(transport::Request& r, const ErrorContext& where) override;
  void cancel(transport::Request& r) override;
  bool progress() override;
  bool arm() override;
  void wait_event(Clock::time_point until) override;
  void wake() override;
  int event_fd() const override { return event_fd_; }
  void set_oversubscribed(bool v) override { oversubscribed_ = v; }
  bool oversubscribed() const override { return oversubscribed_; }
  void set_watchdog(transport::Watchdog* w) override { watchdog_ = w; }
  std::optional<Notice> poll_failure() override;
  void send_notice(const Notice& n) override;

 private:
  Error failure(ErrorCode code, int peer, const std::string& what) const;
  /// cancel(), waiting for a transfer under way at most until `until`.
  void cancel_by(transport::Request& r, Clock::time_point until);
  /// Cancels the collective's requests an algorithm left behind when it threw (it waits on one
  /// of several at a time): a receive left posted would write into a buffer its caller freed,
  /// and UCX 1.13 crashes destroying a worker that still holds one (ucs_mpool_cleanup).
  void cancel_collective(Clock::time_point until);
  /// ucp_request_free, and forgets a collective's request.
  void release(void* handle);
  /// `peer`'s call `theirs` differs from this rank's `mine`: tells every rank.
  Notice tell_mismatch(const transport::Call& mine, int peer, const transport::Call& theirs);
  /// tell_mismatch(), and the error to throw (`sizes`: how its message's size differed, if so).
  Error mismatch(const ErrorContext& where, const transport::Call& mine, int peer,
                 const transport::Call& theirs, const std::string& sizes);
  // Calls compared whole (transport/calls/call_history.hpp; worker_calls.cpp).
  /// Asks `peer` for its call at `seq`; false when every outgoing slot is busy.
  bool ask(int peer, uint64_t seq);
  /// Answers queries and takes answers that arrived (run by progress()).
  void take_control();
  /// The mismatch an answer about the current call shows, if one does.
  std::optional<Error> answered_mismatch();
  /// A message of the finished call `seq` that nobody took, whose sender's call differs from
  /// this rank's there (a message of equal calls is logged once: the algorithms differ).
  struct Discord {
    transport::Call mine;
    int peer;
    transport::Call theirs;
  };
  std::optional<Discord> unclaimed(uint64_t seq);
  /// Sends a control message of `bytes` (<= kControlBytes) from one of the outgoing slots.
  bool send_control(int peer, transport::tags::Control kind, const void* data, size_t bytes);
  bool post_control_receive(transport::tags::Control kind);
  /// Tells every peer that this rank is leaving and waits, until `until`, to hear the same from
  /// them: which peers' endpoints can close without a flush (worker_close.cpp). Goodbyes not yet
  /// heard stay posted in goodbyes_.
  std::vector<bool> part(Clock::time_point until);
  /// The watchdog says the current operation cannot complete (a peer died, an abort).
  bool group_failed();
  static void on_endpoint_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  /// The tag of the current collective's message from `src` (transport/tags.hpp).
  uint64_t collective_tag(int src, uint32_t step) const;
  transport::Request post(bool recv, int peer, void* data, size_t bytes, uint64_t tag,
                          uint64_t mask = ~uint64_t(0));

  int rank_;
  int size_;
  bool one_node_;
  ucp_worker_h worker_ = nullptr;
  std::shared_ptr<Context> context_;
  std::vector<ucp_ep_h> eps_;
  int event_fd_ = -1;  // the worker's efd
  int wake_fd_ = -1;   // eventfd for wake()
  int epoll_fd_ = -1;
  // State of the collective being run (only touched by the executing thread).
  uint64_t seq_ = 0;
  transport::Call call_;   // of the collective under way
  uint32_t tag_call_ = 0;  // what its messages carry (call_bits.hpp; 0 in STRATA_CHECK's exchange)
  ErrorContext where_;
  Clock::time_point deadline_;
  bool oversubscribed_ = false;
  transport::Watchdog* watchdog_ = nullptr;
  // Failure notices: one receive from any source, always posted.
  Notice notice_in_;
  Notice notice_out_;
  void* notice_request_ = nullptr;
  // Calls compared whole: this rank's last calls, a receive each for queries and answers (their
  // callback raises control_arrived_), the latest answer with its sender, and the mismatch
  // look_back() found, for poll_failure().
  transport::CallHistory history_;
  transport::CallQuery query_in_;
  transport::CallAnswer answer_in_;
  void* query_request_ = nullptr;
  void* answer_request_ = nullptr;
  bool control_arrived_ = false;
  std::optional<std::pair<int, transport::CallAnswer>> answer_;
  std::optional<Notice> found_;
  uint64_t warned_seq_ = ~uint64_t(0);  // an unclaimed message of agreeing calls, logged once
  // Outgoing queries and answers: their buffers stay here until UCX lets go of them.
  static constexpr size_t kControlBytes = sizeof(transport::CallAnswer);
  struct Outgoing {
    alignas(8) uint8_t data[kControlBytes];
    void* request = nullptr;
  };
  std::array<Outgoing, 8> outgoing_;
  std::atomic<int> unreachable_peer_{-1};  // set by on_endpoint_error
  std::atomic<int> unreachable_status_{0};
  // A notice went out or a collective's wait failed: the group is broken; close endpoints
  // without flushing.
  std::atomic<bool> failed_{false};
  std::vector<void*> goodbyes_;      // receives of the peers' goodbyes, while this worker closes
  std::vector<uint8_t> goodbye_in_;  // ... and their buffers
  std::vector<void*> posted_;        // the collective's requests not yet released (isend, irecv)
  std::vector<std::pair<Worker*, int>> error_args_;  // (this, peer) for each endpoint's handler
};

}  // namespace strata::ucx
