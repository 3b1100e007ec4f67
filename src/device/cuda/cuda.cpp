// device.hpp over the CUDA runtime.
#include <cuda_runtime.h>

#include "device/device.hpp"

namespace strata::device {
namespace {

void check(cudaError_t r, const char* call, const ErrorContext& where) {
  if (r == cudaSuccess) return;
  throw Error(
      ErrorCode::transport, where,
      std::string(call) + " failed: " + cudaGetErrorString(r) + " (" + cudaGetErrorName(r) + ")");
}

}  // namespace

bool built() { return true; }

int device_of(const void* p, const ErrorContext& where, const char* what) {
  cudaPointerAttributes a{};
  const cudaError_t r = cudaPointerGetAttributes(&a, p);
  if (r != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it for the caller's next CUDA call
    throw Error(ErrorCode::invalid_argument, where,
                std::string(what) + " is marked CUDA device memory, but this rank has no " +
                    "usable CUDA device (cudaPointerGetAttributes: " + cudaGetErrorString(r) + ")");
  }
  if (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged) return a.device;
  return -1;
}

void use_device(int d, const ErrorContext& where) {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == d) return;
  check(cudaSetDevice(d), "cudaSetDevice", where);
}

std::string device_uuid(int d, const ErrorContext& where) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, d), "cudaGetDeviceProperties", where);
  static const char* hex = "0123456789abcdef";
  std::string id;
  for (unsigned char c : prop.uuid.bytes) {
    id += hex[c >> 4];
    id += hex[c & 15];
  }
  return id;
}

int device_count(const ErrorContext& where) {
  int n = 0;
  check(cudaGetDeviceCount(&n), "cudaGetDeviceCount", where);
  return n;
}

OwnStream::OwnStream(const ErrorContext& where) {
  cudaStream_t s;
  // Blocking: ordered after the legacy default stream's work, so that a plain cudaMemcpy (whose
  // small pageable copies land after it returns) or kernel before the call is seen by it.
  check(cudaStreamCreateWithFlags(&s, cudaStreamDefault), "cudaStreamCreateWithFlags", where);
  s_ = s;
}

OwnStream::~OwnStream() { cudaStreamDestroy(static_cast<cudaStream_t>(s_)); }

Event::Event(const ErrorContext& where) {
  cudaEvent_t e;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags", where);
  e_ = e;
}

Event::~Event() { cudaEventDestroy(static_cast<cudaEvent_t>(e_)); }

void Event::record(Stream s, const ErrorContext& where) {
  check(cudaEventRecord(static_cast<cudaEvent_t>(e_), static_cast<cudaStream_t>(s)),
        "cudaEventRecord", where);
}

bool Event::done(const ErrorContext& where) const {
  const cudaError_t r = cudaEventQuery(static_cast<cudaEvent_t>(e_));
  if (r == cudaErrorNotReady) return false;
  check(r, "cudaEventQuery", where);
  return true;
}

Pinned::~Pinned() {
  if (p_) cudaFreeHost(p_);
}

void* Pinned::get(size_t bytes, const ErrorContext& where) {
  if (bytes <= bytes_) return p_;
  if (p_) cudaFreeHost(p_);
  p_ = nullptr;
  bytes_ = 0;
  check(cudaHostAlloc(&p_, bytes, cudaHostAllocDefault), "cudaHostAlloc", where);
  bytes_ = bytes;
  return p_;
}

void copy_async(void* dst, const void* src, size_t bytes, Stream s, const ErrorContext& where) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(s)),
        "cudaMemcpyAsync", where);
}

}  // namespace strata::device
