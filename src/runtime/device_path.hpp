// The device path (docs/device.md): a call on CUDA memory leaves the one dispatch path
// (runtime/calls.cpp) here. Where every rank of the group holds its own GPU it goes by NCCL,
// enqueued on the call's stream, its Work completing through a CUDA event; where ranks share a
// GPU (or STRATA_DEVICE_PATH=staged) it is staged through pinned host memory and the host
// algorithms, chunked so that the copies overlap the host collective.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

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

 private:
  std::mutex spare_mu_;
  std::vector<std::unique_ptr<device::Event>> spare_;
};

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
/// Staged collective (runtime/device_staged.cpp): copies, host algorithms, copies back; returns
/// once the output is written on the stream.
Work staged_call(Group& g, DeviceGroup& d, algo::Collective c, const algo::Args& a,
                 device::Stream s);
/// Polls `e` until done, failing with ErrorCode::timeout at `deadline`.
void wait_event(const device::Event& e, Clock::time_point deadline, const ErrorContext& where);
/// A Work already complete (a staged call's, whose output the stream has written).
Work completed_work();
/// A Work no op queue drives: its waiters call `step`, which completes the state once done (or
/// throws, failing it).
Work polled_work(Group& g, std::function<void(detail::WorkState&)> step);

}  // namespace strata::runtime
