// Helpers of the GPU tests: device memory, copies, and the skip where no GPU is present.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "strata/strata.hpp"

namespace gpu {

/// Skips the test (on every rank alike) where this machine has no CUDA device.
#define STRATA_NEED_GPU()                                            \
  do {                                                               \
    int count_ = 0;                                                  \
    if (cudaGetDeviceCount(&count_) != cudaSuccess || count_ == 0) { \
      cudaGetLastError();                                            \
      GTEST_SKIP() << "no CUDA device";                              \
    }                                                                \
  } while (0)

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

/// `bytes` of device memory, freed with the object.
class DeviceMemory {
 public:
  explicit DeviceMemory(size_t bytes) { ok_ = cudaMalloc(&p_, bytes ? bytes : 1) == cudaSuccess; }
  ~DeviceMemory() { cudaFree(p_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  bool ok() const { return ok_; }
  uint8_t* get() const { return static_cast<uint8_t*>(p_); }
  /// A Buffer of `count` elements of `dt` from element `first`.
  strata::Buffer view(strata::DataType dt, size_t count, size_t first = 0) const {
    return strata::Buffer{get() + first * strata::dtype_size(dt), count, dt,
                          strata::MemoryKind::cuda};
  }

 private:
  void* p_ = nullptr;
  bool ok_ = false;
};

inline void up(const DeviceMemory& d, const std::vector<uint8_t>& h) {
  ASSERT_EQ(cudaMemcpy(d.get(), h.data(), h.size(), cudaMemcpyHostToDevice), cudaSuccess);
}
inline std::vector<uint8_t> down(const DeviceMemory& d, size_t bytes) {
  std::vector<uint8_t> h(bytes);
  EXPECT_EQ(cudaMemcpy(h.data(), d.get(), bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

}  // namespace gpu
