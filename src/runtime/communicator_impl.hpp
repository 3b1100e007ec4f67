// State behind a Communicator handle.
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "algorithms/registry.hpp"
#include "runtime/argument_checks.hpp"
#include "runtime/levels.hpp"
#include "runtime/op_queue.hpp"
#include "shm/segment.hpp"
#include "strata/communicator.hpp"

namespace strata {
namespace runtime {
struct DeviceGroup;
}

class Communicator::Impl {
 public:
  Impl(std::shared_ptr<Store> store, int rank, int size, const CommOptions& options);
  /// Closes the op queue before any member goes (OpQueue::close).
  ~Impl();

  /// Error context for operation `op` with the sequence number the next collective would get.
  ErrorContext context(const char* op, int peer = -1);
  /// Checks the arguments of `op`, whose errors carry context(op, peer): the seq of the next
  /// collective, or with `point_to_point` of the next send or receive (the numbers they get).
  runtime::Checker checker(const char* op, int peer = -1, bool point_to_point = false) const;
  /// Queues a collective: `body` runs on the executing thread with the transport set up for it.
  /// `data` names the dtype and count the flight recorder and STRATA_CHECK show; `bytes` (per rank)
  /// tells the op queue how soon to start it without a waiting caller. `reduce`: the ReduceOp of a
  /// reduction (for STRATA_CHECK's fingerprint), else -1.
  /// `where`, when given, gets the call's context (its sequence number).
  Work collective(const char* op, int peer, Buffer data, int reduce, size_t bytes,
                  std::function<void(algo::Exec&)> body, ErrorContext* where = nullptr);
  /// A collective the op queue does not run (a NCCL call, ordered by its stream): its context,
  /// with the next sequence number taken.
  ErrorContext next_call(const char* op, int peer) {
    return next_collective(op, peer, {}, -1).where;
  }
  /// An operation run outside the op queue, finished by polling `step` (OpQueue::watch, which
  /// runs `on_failure` if it fails), shown in the flight recorder as `where` with `data`'s
  /// dtype and count.
  Work watch(const ErrorContext& where, Buffer data, std::function<void(detail::WorkState&)> step,
             std::function<void()> on_failure = {}) {
    return Work(
        queue_->watch(where, data.dtype, data.count, std::move(step), std::move(on_failure)));
  }
  /// For arguments only this rank could check (a root's buffers), refused with `e`: runs, in
  /// the collective's place (after what is queued before it), telling every rank so (their waits
  /// fail at once, naming this one) and failing with `e`, which leaves the group unusable here
  /// too. The caller throws `e`.
  void refuse(const char* op, int peer, Buffer data, int reduce, const Error& e);
  /// The flight recorder's table (see runtime/flight_recorder.hpp).
  std::string flight_record() const { return queue_->recorder().dump("on request"); }
  /// The algorithm for collective `c` on `bytes` per rank (the registry's cost model or
  /// STRATA_ALGO), logged once per size class at INFO.
  const algo::Algorithm& choose(algo::Collective c, size_t bytes);
  /// Collective `c` by `algo`'s fast path (algo::Now), completed inside the call when the op
  /// queue is idle and the peers are in step (runtime/immediate.cpp). Empty when it must be
  /// queued instead; the caller has checked the arguments.
  std::optional<Work> try_now(const algo::Algorithm& algo, algo::Collective c, const algo::Args& a);
  /// Queues a point-to-point send or receive.
  Work point_to_point(bool is_send, Buffer buf, int peer, uint32_t tag);
  /// Communicator::abort(): this group and its node and rail groups; `why`, when given, goes
  /// to the peers with the abort.
  void abort(const std::string& why = {});
  /// Next split's sequence number (every rank calls split in the same order).
  uint64_t next_split() { return split_seq_++; }
  /// Next symmetric buffer's number, from 1 (every rank allocates them in the same order).
  uint32_t next_window() { return ++window_seq_; }
  /// The group's shared segment: null unless every rank is on this node (and STRATA_SHM).
  shm::Segment* segment() { return shm_.get(); }

  const int rank;
  const int size;
  const std::string name;
  const std::shared_ptr<Store> store;
  /// The thread that issues this group's collectives (its tid; 0: any thread, the node and
  /// rail groups, whose legs run on whichever thread executes their group's collective):
  /// another thread's are refused (runtime/calls.cpp, README "Threads").
  std::atomic<int> issuer{0};
  /// The device path's state, made by the first device collective (runtime/device_path.hpp).
  /// Shared with the watched NCCL calls and staged receives, which may outlive the group.
  std::shared_ptr<runtime::DeviceGroup> device;
  /// Deadline of this group's operations.
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// Throws (peer_failure or aborted, naming the culprit) once the group cannot complete an
  /// operation: a peer gone, an abort. From any thread but one running the op queue.
  void check_health(const ErrorContext& where) { queue_->check_health(where); }

 private:
  /// The op of the next collective: its sequence number taken, its context and sizes filled in.
  runtime::Op next_collective(const char* op, int peer, Buffer data, int reduce);
  /// The next collective's sequence number, taken; on one node, published as issued.
  uint64_t take_seq();
  /// runtime::Op::issued_by_all of collective `seq`: empty where the group cannot tell.
  std::function<bool()> issued_by_all(uint64_t seq) const;
  algo::GroupView view_;  // what choose() needs of the layout and links, fixed at creation
  // Each collective's last choice, one word (bytes << 8 | table index + 1) so no reader sees it
  // torn: a training loop repeats its sizes, and a choice costs ~50 ns of cost-model arithmetic.
  std::array<std::atomic<uint64_t>, algo::kCollectives> last_choice_{};
  algo::ChoiceLog choice_log_;
  std::chrono::milliseconds timeout_;
  // A group that spans nodes: its node and rail groups. Destroyed after the op queue (declared
  // first), whose operations use them.
  std::unique_ptr<runtime::Levels> levels_;
  std::shared_ptr<transport::PeerHealth> health_;  // consulted by the op queue's and shm's waits
  std::unique_ptr<shm::Segment> shm_;   // declared before the op queue: outlives its thread
  shm::StagingWriteModes write_modes_;  // used by the op queue's thread only
  std::shared_ptr<runtime::OpQueue> queue_;
  // Atomic, not locked: read or bumped once per call (ranks issue in one order per group anyway).
  std::atomic<uint64_t> coll_seq_{0};
  std::atomic<uint64_t> p2p_seq_{0};
  uint64_t split_seq_ = 0;
  uint32_t window_seq_ = 0;
};

namespace runtime {
/// The group behind a Communicator handle (tests of the runtime's internals).
struct GroupAccess {
  static Communicator::Impl& of(const Communicator& c) { return *c.impl_; }
};
}  // namespace runtime

}  // namespace strata
