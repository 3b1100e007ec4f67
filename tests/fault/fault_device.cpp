#include "tests/fault/fault_device.hpp"

#include <cstdio>
#include <cstdlib>

#ifdef STRATA_FAULT_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fault_device {

#ifdef STRATA_FAULT_CUDA
namespace {
void check(cudaError_t r, const char* what) {
  if (r == cudaSuccess) return;
  std::fprintf(stderr, "strata-fault-rank: %s: %s\n", what, cudaGetErrorString(r));
  std::exit(5);
}
}  // namespace

bool present() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

void* alloc(size_t bytes) {
  int n = 0;
  check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  const char* local = std::getenv("LOCAL_RANK");
  check(cudaSetDevice((local ? std::atoi(local) : 0) % n), "cudaSetDevice");
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  return p;
}

void to_device(void* dst, const void* src, size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
}

void to_host(void* dst, const void* src, size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
}
#else
bool present() { return false; }
void* alloc(size_t) {
  std::fprintf(stderr, "strata-fault-rank: this build has no device path\n");
  std::exit(5);
}
void to_device(void*, const void*, size_t) {}
void to_host(void*, const void*, size_t) {}
#endif

}  // namespace fault_device
