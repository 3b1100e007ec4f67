// The device layer: the thin seam over CUDA that the runtime's device path uses (docs/device.md).
// Nothing here includes CUDA's headers, so the runtime compiles without them: device/cuda/
// implements it where CUDA and NCCL were found at build time, device/none/ refuses otherwise.
#pragma once

#include <cstddef>
#include <string>

#include "strata/error.hpp"

namespace strata::device {

/// True where this build has the device path.
bool built();

/// A CUDA stream as the caller's cudaStream_t (nullptr: the legacy default stream).
using Stream = void*;

/// The CUDA device whose memory `p` is, read from its pointer attributes (never guessed); -1 for
/// host memory, pinned or not. Throws Error(invalid_argument, where) naming `what` when no CUDA
/// device can be asked (no driver, no GPU on this rank).
int device_of(const void* p, const ErrorContext& where, const char* what);
/// Makes `d` the calling thread's current device.
void use_device(int d, const ErrorContext& where);
/// Device d's UUID, unique across machines: ranks whose ids repeat share a GPU.
std::string device_uuid(int d, const ErrorContext& where);
/// How many CUDA devices this process sees (CUDA_VISIBLE_DEVICES applied).
int device_count(const ErrorContext& where);

/// A stream of the current device, owned: the communicator's own. It synchronises with the
/// legacy default stream (cudaStreamDefault), as work issued without a stream expects.
class OwnStream {
 public:
  explicit OwnStream(const ErrorContext& where);
  ~OwnStream();
  OwnStream(const OwnStream&) = delete;
  OwnStream& operator=(const OwnStream&) = delete;
  Stream get() const { return s_; }

 private:
  Stream s_ = nullptr;
};

/// A CUDA event (timing disabled), recorded on a stream and polled.
class Event {
 public:
  explicit Event(const ErrorContext& where);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(Stream s, const ErrorContext& where);
  /// True once the work recorded before it has run; throws Error(transport) for a CUDA error.
  bool done(const ErrorContext& where) const;

 private:
  void* e_ = nullptr;
};

/// Page-locked host memory for staging, grown on demand (its contents are not kept).
class Pinned {
 public:
  Pinned() = default;
  ~Pinned();
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
  void* get(size_t bytes, const ErrorContext& where);

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

/// Copies `bytes` on stream `s` (cudaMemcpyAsync, direction from the pointers).
void copy_async(void* dst, const void* src, size_t bytes, Stream s, const ErrorContext& where);

}  // namespace strata::device
