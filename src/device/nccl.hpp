// NCCL behind the device seam: one NCCL communicator per Strata group that uses distinct GPUs
// (docs/device.md, "The two paths"). CUDA-free like device.hpp.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "device/device.hpp"
#include "strata/types.hpp"

namespace strata::device {

/// ncclUniqueId's bytes, which rank 0 makes and every rank of the group is given.
using NcclId = std::array<char, 128>;
NcclId nccl_unique_id(const ErrorContext& where);

/// Why NCCL cannot carry `dt` (with reduction `op`, when given); empty when it can.
std::string nccl_refuses(DataType dt, std::optional<ReduceOp> op = std::nullopt);

/// One NCCL communicator of the current device. Every call enqueues on `stream` and returns;
/// errors throw strata::Error(transport) naming the NCCL call and NCCL's own last error.
class Nccl {
 public:
  /// Waits for the initialisation until `deadline`: a rank that never joins makes it fail here
  /// with ErrorCode::timeout instead of hanging.
  Nccl(const NcclId& id, int rank, int size, Clock::time_point deadline, const ErrorContext& where);
  ~Nccl();
  Nccl(const Nccl&) = delete;
  Nccl& operator=(const Nccl&) = delete;

  void all_reduce(const void* in, void* out, size_t count, DataType dt, ReduceOp op, Stream s);
  void reduce(const void* in, void* out, size_t count, DataType dt, ReduceOp op, int root,
              Stream s);
  void broadcast(const void* in, void* out, size_t count, DataType dt, int root, Stream s);
  /// `count`: one rank's block (the output's count).
  void reduce_scatter(const void* in, void* out, size_t count, DataType dt, ReduceOp op, Stream s);
  /// `count`: one rank's block (the input's count).
  void all_gather(const void* in, void* out, size_t count, DataType dt, Stream s);
  /// Sends and receives between group_start() and group_end() go as one (all-to-all, gather).
  /// Every call after abort() throws ErrorCode::aborted (the communicator is gone).
  void group_start();
  void group_end();
  void send(const void* in, size_t count, DataType dt, int peer, Stream s);
  void recv(void* out, size_t count, DataType dt, int peer, Stream s);

  /// ncclCommSplit: collective over this communicator's ranks, each passing its `color`
  /// (negative: takes part, gets none) and `key`, bounded by `deadline` as the constructor is.
  /// Null for a negative color.
  std::unique_ptr<Nccl> split(int color, int key, Clock::time_point deadline,
                              const ErrorContext& where);

  /// NCCL's asynchronous error for this communicator: empty while all is well (or in progress).
  std::string async_error();
  /// ncclCommAbort: ends every operation of this communicator without waiting for peers.
  void abort();

 private:
  Nccl(void* comm, const ErrorContext& where) : comm_(comm), where_(where) {}  // split()'s
  void settle(const char* call, int result);  // throws for a call that failed
  void* live() const;                         // the communicator, unless aborted (throws)
  void* comm_ = nullptr;
  ErrorContext where_;
  std::atomic<bool> aborted_{false};
};

}  // namespace strata::device
