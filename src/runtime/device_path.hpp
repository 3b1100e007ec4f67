// The device path (docs/device.md): a call on CUDA memory leaves the one dispatch path
// (runtime/calls.cpp) here. Where every rank of the group holds its own GPU it goes by NCCL,
// enqueued on the call's stream, its Work completing through a CUDA event; where ranks share a
// GPU (or STRATA_DEVICE_PATH=staged) it is staged through pinned host memory and the host
// algorithms, chunked so that the copies overlap the host collective.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/registry.hpp"
#include "device/device.hpp"
#include "device/nccl.hpp"
#include "device/path.hpp"
#include "runtime/work_state.hpp"
#include "strata/communicator.hpp"

namespace strata::runtime {

using Group = Communicator::Impl;

/// Where a call's buffers live, and the stream a device call is ordered on.
struct Placement {
  MemoryKind memory = MemoryKind::host;
  bool has_stream = false;          // else the communicator's own stream
  device::Stream stream = nullptr;  // with has_stream: the caller's (nullptr: legacy default)
};

/// A group's device state, made by its first device collective (collective: every rank's GPU
/// is compared to choose the path, and NCCL's id is broadcast over the host path).
struct DeviceGroup : std::enable_shared_from_this<DeviceGroup> {
  int device = -1;
  device::Path path = device::Path::staged;
  std::unique_ptr<device::OwnStream> own;
  std::unique_ptr<device::Nccl> nccl;
  device::Pinned in, out;
  std::vector<std::unique_ptr<device::Event>> events;  // staged chunks', reused call to call
  device::Stream stream(const Placement& at) const {
    return at.has_stream ? at.stream : own->get();
  }
  /// An event for one NCCL call's completion, from a pool it returns to when released:
  /// creating one per call cost microseconds.
  std::shared_ptr<device::Event> event(const ErrorContext& where);
  /// The NCCL calls' order on their streams: each call takes the next ticket, and once one
  /// call's event is seen passed, every earlier ticket of its stream has passed too, without a
  /// query of its own (each cudaEventQuery cost 1.3 us on the H200's host).
  uint64_t take_ticket() { return tickets_.fetch_add(1, std::memory_order_relaxed) + 1; }
  bool passed(device::Stream s, uint64_t ticket);
  void mark_passed(device::Stream s, uint64_t ticket);

 private:
  std::atomic<uint64_t> tickets_{0};
  std::mutex passed_mu_;
  std::vector<std::pair<device::Stream, uint64_t>> passed_;  // per stream, the latest seen
  std::mutex spare_mu_;
  std::vector<std::unique_ptr<device::Event>> spare_;
};

/// The device state of a group made by Communicator::split from `parent`: where the parent's
/// device calls go by NCCL, its NCCL communicator split by ncclCommSplit (collective over the
/// parent's ranks, a negative color's included), errors naming `where` (the new group's);
/// null otherwise, and the new group sets up at its first device call.
std::shared_ptr<DeviceGroup> split_device(Group& parent, int color, int key,
                                          const ErrorContext& where);
/// The device of a call's CUDA buffers (checked by their pointer attributes: device memory, all
/// on one device, that of the group's earlier device calls). Null or empty buffers don't count.
int call_device(Group& g, const char* op, const void* a, const void* b);
/// Collective `c` on CUDA memory (arguments checked as on the host path).
Work device_call(Group& g, algo::Collective c, const algo::Args& a, const Placement& at);
/// Send or receive of a CUDA buffer: NCCL, ordered on the stream, where the group's device
/// collectives use it (NCCL has no tags: tag 0 only); else staged through the host path, a
/// receive's output written when its Work is waited on or tested.
Work device_point_to_point(Group& g, bool is_send, Buffer b, int peer, uint32_t tag,
                           const Placement& at);
/// Sends and receives of CUDA buffers issued together (Communicator::send_recv): inside one
/// ncclGroupStart/End where the group is on NCCL, each on its own when staged.
std::vector<Work> device_send_recv(Group& g, const std::vector<PeerOp>& ops, const Placement& at);
/// Staged collective (runtime/device_staged.cpp): copies, host algorithms, copies back; returns
/// once the output is written on the stream.
Work staged_call(Group& g, DeviceGroup& d, algo::Collective c, const algo::Args& a,
                 device::Stream s);
/// Polls `e` until done, failing with ErrorCode::timeout at `deadline`.
void wait_event(const device::Event& e, Clock::time_point deadline, const ErrorContext& where);
/// A Work already complete (a staged call's, whose output the stream has written).
Work completed_work();

}  // namespace strata::runtime
