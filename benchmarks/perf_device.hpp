// strata-perf --device cuda: the benchmark's two buffers in CUDA device memory, the copies the
// element checks need, and --compare nccl's raw NCCL calls on the same buffers. Built from
// perf_device_cuda.cpp where CUDA and NCCL are, perf_device_none.cpp (which refuses) elsewhere.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "perf_case.hpp"

namespace perf {

/// Device twins of the host buffers a and b, on the GPU LOCAL_RANK picks. Throws
/// std::runtime_error naming what failed.
class DeviceBuffers {
 public:
  DeviceBuffers(size_t a_bytes, size_t b_bytes);
  ~DeviceBuffers();
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;
  /// The device view at the offset `host` has in host buffer a or b.
  strata::Buffer mirror(strata::Buffer host, std::span<const uint8_t> a,
                        std::span<const uint8_t> b) const;
  /// "NVIDIA H200 (device 0)".
  std::string name() const;

 private:
  uint8_t *a_ = nullptr, *b_ = nullptr;
  int device_ = 0;
};

/// Copies `bytes` between host and device memory, synchronously.
void copy_memory(void* dst, const void* src, size_t bytes);

/// Microseconds per call on this rank of raw NCCL's `c` on the same device buffers, issued
/// `iters` times and synchronised once (as nccl-tests does), after `warmup`; nullopt where
/// NCCL cannot run it (ranks sharing a GPU, a collective NCCL lacks).
std::optional<double> time_nccl(strata::Communicator& comm, const Case& c, strata::Buffer in,
                                strata::Buffer out, int warmup, int iters);

}  // namespace perf
