// Communicator: a group of ranks and every collective and point-to-point operation on it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/store.hpp"
#include "strata/types.hpp"
#include "strata/work.hpp"

namespace strata {
namespace runtime {
struct GroupAccess;  // the library's own layers and tests reach the group behind a handle
}

/// Options for creating a communicator.
struct CommOptions {
  /// Name used in logs and errors. "world" for the communicator from from_env(). Left at
  /// "world" for split() or shrink(), the child is named after its parent
  /// ("<parent>/split<i>.c<color>", "<parent>/shrink<i>.x<excluded>"); give a name to choose one.
  std::string name = "world";
  /// Deadline of every operation; 0 means the parent's for split() and shrink(), otherwise
  /// STRATA_TIMEOUT (default 300 s).
  std::chrono::milliseconds timeout{0};
  /// Asked every 250 ms while the group is set up (from_env, split, shrink: reaching the store,
  /// waiting for every member's part): true ends the call with ErrorCode::aborted, as a user's
  /// Ctrl-C does in the Python module. Not kept once the group exists.
  std::function<bool()> cancelled;
};

/// One send or receive of Communicator::send_recv.
struct PeerOp {
  enum Kind : uint8_t { send, recv };
  Kind kind = send;
  Buffer buffer;     ///< the input of a send, the output of a receive
  int peer = 0;      ///< a rank of the group (kAnySource for a host receive)
  uint32_t tag = 0;  ///< messages of one pair match in issue order per tag (0 only on NCCL)
};

/// Host memory that every rank of a group on one node maps (Communicator::alloc_symmetric):
/// all_gather, all_to_all and all_to_allv read an input lying in it from the owner's memory, one
/// copy where other buffers take two (staged through the shared segment), as NCCL's registered
/// windows and torch's symmetric memory do for GPUs. Use it like any buffer, for input, output
/// or neither; the memory goes with the last copy of the handle (the group may go first). Free
/// it on every rank after its last call: a rank that has freed its part no longer maps the
/// others', and a call that needs them fails on both sides, naming the buffer.
class SymmetricBuffer {
 public:
  SymmetricBuffer() = default;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  explicit operator bool() const { return holder_ != nullptr; }

 private:
  friend class Communicator;
  std::shared_ptr<void> holder_;  // the mapping (src/shm/window.hpp)
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

/// A group of `size()` ranks. Operations return a Work handle at once; operations on one
/// communicator complete in the order they were issued (many may be outstanding), and different
/// communicators progress independently. Arguments are checked before any byte moves; a bad call
/// throws strata::Error naming the rank, group, operation, sequence number and peer.
///
/// When a peer dies (or aborts), every pending and later operation on the group fails with
/// ErrorCode::peer_failure (or aborted) naming it: at once for a peer on this machine or a
/// connection the network reports broken, otherwise at the operation's deadline (STRATA_TIMEOUT).
///
/// Buffer rules (as NCCL): out-of-place buffers must not overlap; an operation is in-place when
///  - all_reduce, broadcast, reduce: output.data == input.data;
///  - all_gather: input.data == output.data + rank * input.bytes();
///  - reduce_scatter: output.data == input.data + rank * output.bytes();
///  - gather (on root): input.data == output.data + root * input.bytes();
///  - scatter (on root): output.data == input.data + root * output.bytes();
/// any other overlap is an error (all_to_all(v) have no in-place form). The caller keeps buffers
/// alive until the Work completes.
///
/// Copies of a Communicator share one underlying group.
class Communicator {
 public:
  /// Joins the job described by the environment: Open MPI (`mpirun`, OMPI_COMM_WORLD_*),
  /// torchrun style (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; strata-run sets
  /// them) or Slurm's `srun` (SLURM_PROCID, SLURM_NTASKS, its node list). Collective over the
  /// whole job.
  static Communicator from_env(const CommOptions& options = {});
  /// Builds a communicator of `size` ranks that meet through `store` (which must be shared by
  /// exactly those ranks, with no other communicator using the same keys).
  static Communicator create(std::shared_ptr<Store> store, int rank, int size,
                             const CommOptions& options = {});

  /// An empty handle: every call on it throws (invalid_argument); see operator bool.
  Communicator() = default;
  /// This process's rank in the group, 0 to size() - 1.
  int rank() const;
  /// The number of ranks in the group.
  int size() const;
  /// The name errors and logs give the group (CommOptions::name).
  const std::string& name() const;
  /// The flight recorder: this communicator's last operations (STRATA_FLIGHT_RECORDER, 128 by
  /// default), oldest first, with sequence number, op, dtype, count, peer or root, state and
  /// times. The same table is printed on a timeout, on a peer's death or abort, on abort() and on
  /// SIGUSR1 (to STRATA_DUMP_DIR if set).
  std::string flight_record() const;
  /// The store this communicator was built on (for out-of-band agreement by the layers above).
  std::shared_ptr<Store> store() const;

  /// Element-wise reduction across ranks; every rank receives the result.
  Work all_reduce(Buffer input, Buffer output, ReduceOp op);
  Work all_reduce(Buffer inout, ReduceOp op) { return all_reduce(inout, inout, op); }
  /// input: size() * output.count elements; rank r receives block r of the reduction.
  Work reduce_scatter(Buffer input, Buffer output, ReduceOp op);
  /// output: size() * input.count elements; block r is rank r's input.
  Work all_gather(Buffer input, Buffer output);
  /// input and output: size() blocks of count/size() elements; block j of input goes to rank j,
  /// and block i of output comes from rank i.
  Work all_to_all(Buffer input, Buffer output);
  /// Like all_to_all with per-peer counts and displacements (in elements): send_counts[j]
  /// elements from send_displs[j] go to rank j, whose recv_counts for this rank must match
  /// (else both ranks fail naming each other); send_counts[rank()] == recv_counts[rank()].
  /// Every block must fit its buffer, receive blocks must not overlap, and input and output must
  /// not overlap (no in-place).
  Work all_to_allv(Buffer input, const std::vector<size_t>& send_counts,
                   const std::vector<size_t>& send_displs, Buffer output,
                   const std::vector<size_t>& recv_counts, const std::vector<size_t>& recv_displs);
  /// Copies root's buffer to every rank.
  Work broadcast(Buffer inout, int root);
  /// Out-of-place broadcast: root sends `input`, every rank (root included) receives in `output`.
  Work broadcast(Buffer input, Buffer output, int root);
  /// Reduction delivered to `root` only; output is ignored on other ranks.
  Work reduce(Buffer input, Buffer output, ReduceOp op, int root);
  /// root receives size() * input.count elements in rank order; output ignored elsewhere.
  Work gather(Buffer input, Buffer output, int root);
  /// root sends block r of input (size() * output.count elements) to rank r.
  Work scatter(Buffer input, Buffer output, int root);
  /// For a caller that checks the root's own arguments itself (a binding converting gather's
  /// output or scatter's input) and finds them wrong: on the root, in place of the call, tells
  /// the other ranks, whose matching call then fails naming this rank and `why` instead of
  /// waiting for it, and throws Error(invalid_argument) with `why`. `collective` is "broadcast",
  /// "reduce", "gather" or "scatter"; `data` the buffer every rank passes (broadcast's and
  /// scatter's output, reduce's and gather's input); `op` reduce's operation.
  [[noreturn]] void refuse_root_call(std::string_view collective, int root, Buffer data,
                                     ReduceOp op, const std::string& why);
  /// Point-to-point. Messages between one pair with one tag match in issue order. A CUDA buffer
  /// on NCCL takes tag 0 only (NCCL has no tags; others are refused by name).
  Work send(Buffer input, int peer, uint32_t tag = 0);
  /// `peer` may be kAnySource for a host buffer: the first message with `tag` from any rank;
  /// Work::source() then says which rank sent it.
  Work recv(Buffer output, int peer, uint32_t tag = 0);
  /// Sends and receives that progress together, as NCCL's grouped ncclSend and ncclRecv: where
  /// the group's device calls go by NCCL, the CUDA ones are issued inside one
  /// ncclGroupStart/End, so that a ring in which every rank sends before it receives cannot
  /// deadlock (one by one, each send would wait for a receive queued behind its peer's own
  /// send). Host buffers, and CUDA ones on the staged path, go as send() and recv() would: they
  /// progress together anyway. Every op is checked before any is issued. Returns one Work per
  /// op, in order. Any thread, like send and recv.
  std::vector<Work> send_recv(const std::vector<PeerOp>& ops);
  /// Completes when every rank has entered it.
  Work barrier();

  /// Collective: `bytes` of zeroed host memory on every rank (every rank passes the same size;
  /// 0 is allowed), mapped by the others when the whole group shares one node and
  /// STRATA_SHM is on; elsewhere plain memory that collectives take as any other. Throws
  /// strata::Error on every rank, naming the rank, when sizes differ or a rank cannot make or
  /// map its part.
  SymmetricBuffer alloc_symmetric(size_t bytes);

  /// This communicator with its device calls ordered on `cuda_stream` (a cudaStream_t; nullptr
  /// is the legacy default stream) instead of the communicator's own: a call on CUDA buffers
  /// runs after the work queued on that stream before it, and the work queued after it sees its
  /// output, as with NCCL. Host calls are unaffected. The copy shares this group
  /// (docs/device.md).
  Communicator on_stream(void* cuda_stream) const;

  /// Collectives are issued by one thread per communicator, the one that created it, so that
  /// every rank issues them in one order (two threads would give the ranks different orders,
  /// and the peers would combine one call's data with another's). Another thread's collective
  /// is refused (ErrorCode::invalid_argument, naming both threads); sends, receives, waits and
  /// abort() may come from any thread. This hands the issuing to the calling thread: call it on
  /// every rank at the same point of the sequence, with nothing being issued meanwhile.
  void issue_from_this_thread();

  /// Ends this group at once, like ncclCommAbort: every queued or running operation fails with
  /// ErrorCode::aborted (a running one within about 100 ms), the other ranks' operations on the
  /// group fail naming this rank, the progress thread stops, and every later call fails. Any
  /// thread may call it, including while another waits. Memory is freed with the last handle.
  void abort();

  /// Throws the failure this group has met (ErrorCode::peer_failure or aborted, naming the
  /// culprit) after looking for news that costs no message: a peer's process on this machine
  /// gone, a failure notice, a connection the network reports broken. Returns if there is none.
  /// Never waits for other ranks; any thread. For a caller between operations that wants to
  /// know early (DiLoCo's islands ask every step).
  void check_health();

  /// Collective: ranks that pass the same `color` form a new communicator, ordered by (key, rank).
  /// A rank passing a negative color takes part but gets an empty Communicator back. The child
  /// keeps this handle's deadline and CUDA stream (on_stream) unless `options` sets a deadline.
  Communicator split(int color, int key, const CommOptions& options = {});

  /// A new group of this group's ranks less `exclude` (ranks of this group, e.g. the dead ones),
  /// in their order, like ncclCommShrink: built through the store, so it works when this group
  /// has failed. Collective over the survivors only, who must pass the same list (a survivor
  /// missing makes the others time out naming the setup). Throws strata::Error
  /// (invalid_argument) for a rank out of range, repeated, or this rank's own. The deadline and
  /// stream are kept as by split().
  Communicator shrink(const std::vector<int>& exclude, const CommOptions& options = {});

  /// True unless default-constructed (or returned by split with a negative color).
  explicit operator bool() const { return impl_ != nullptr; }

  class Impl;

 private:
  friend struct runtime::GroupAccess;
  explicit Communicator(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  Communicator on_my_stream(Communicator sub) const;  // `sub` on this handle's stream, if any
  std::shared_ptr<Impl> impl_;
  void* stream_ = nullptr;   // with has_stream_: on_stream()'s
  bool has_stream_ = false;  // else device calls go on the communicator's own stream
};

}  // namespace strata
