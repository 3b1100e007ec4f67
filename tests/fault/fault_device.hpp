// Device memory for the kill tests' "device" mode (fault_rank.cpp) and their skip (kill_test.cpp):
// CUDA's runtime where the build has the device path, nothing elsewhere.
#pragma once

#include <cstddef>

namespace fault_device {

/// True where this build has the device path and this process sees a CUDA device.
bool present();
/// `bytes` of device memory on the GPU LOCAL_RANK picks (freed at exit).
void* alloc(size_t bytes);
void to_device(void* dst, const void* src, size_t bytes);
void to_host(void* dst, const void* src, size_t bytes);

}  // namespace fault_device
