#include "runtime/argument_checks.hpp"

#include <cstdint>

#include "device/device.hpp"
#include "kernels/reduce_kernels.hpp"

namespace strata::runtime {
namespace {

// The most bytes one buffer may span: no allocation reaches half the address space.
constexpr size_t kMaxBytes = size_t(PTRDIFF_MAX);

// A count above kMaxBytes is most likely a negative number converted to size_t.
std::string wrapped(size_t count) {
  return count > kMaxBytes ? " (a negative count, " + std::to_string(int64_t(count)) + "?)" : "";
}

}  // namespace

void Checker::fail(const std::string& what) const {
  throw Error(ErrorCode::invalid_argument, ErrorContext{rank_, group_, op_, seq_, peer_}, what);
}

void Checker::buffer(const Buffer& b, const char* what) const {
  if (static_cast<unsigned>(b.dtype) > static_cast<unsigned>(kLastDataType)) {
    fail(std::string(what) + " has an unknown dtype (" + std::to_string(int(b.dtype)) + ")");
  }
  if (b.memory == MemoryKind::cuda && !device::built()) {
    fail(std::string(what) +
         " is CUDA device memory, but this build has no device path (built without CUDA and "
         "NCCL: docs/device.md)");
  }
  if (b.memory != MemoryKind::host && b.memory != MemoryKind::cuda) {
    fail(std::string(what) + " has an unknown memory kind");
  }
  if (b.data == nullptr && b.count > 0) {
    fail(std::string(what) + " is null with count " + std::to_string(b.count));
  }
  if (b.count > kMaxBytes / dtype_size(b.dtype)) {
    fail(std::string(what) + " count " + std::to_string(b.count) + " is too large: " +
         std::string(dtype_name(b.dtype)) + " elements of " + std::to_string(dtype_size(b.dtype)) +
         " bytes exceed the address space" + wrapped(b.count));
  }
}

size_t Checker::times(const Buffer& b, int n, const char* what) const {
  if (b.count > kMaxBytes / dtype_size(b.dtype) / size_t(n)) {
    fail(std::string(what) + " count " + std::to_string(b.count) + " times the group's " +
         std::to_string(n) + " ranks is too large for " + std::string(dtype_name(b.dtype)));
  }
  return b.count * size_t(n);
}

void Checker::same_dtype(const Buffer& a, const Buffer& b) const {
  if (a.dtype != b.dtype) {
    fail("input dtype " + std::string(dtype_name(a.dtype)) + " differs from output dtype " +
         std::string(dtype_name(b.dtype)));
  }
}

void Checker::count(const Buffer& b, size_t expected, const char* what, const char* why) const {
  if (b.count != expected) {
    fail(std::string(what) + " has " + std::to_string(b.count) + " elements, expected " +
         std::to_string(expected) + " (" + std::string(why) + ")");
  }
}

void Checker::peer(int peer, int size, const char* what) const {
  if (peer < 0 || peer >= size) {
    fail(std::string(what) + " " + std::to_string(peer) + " is out of range for a group of " +
         std::to_string(size));
  }
}

void Checker::reduce_op(DataType dt, ReduceOp op) const {
  if (static_cast<unsigned>(op) > static_cast<unsigned>(kLastReduceOp)) {
    fail("unknown reduction op (" + std::to_string(int(op)) + ")");
  }
  if (!kernels::supports(dt, op)) {
    fail(std::string(op_name(op)) + " is not supported for " + std::string(dtype_name(dt)));
  }
}

void Checker::no_overlap(const Buffer& in, const Buffer& out, bool in_place) const {
  if (in_place || in.bytes() == 0 || out.bytes() == 0) return;
  auto a = reinterpret_cast<uintptr_t>(in.data), b = reinterpret_cast<uintptr_t>(out.data);
  if (a < b + out.bytes() && b < a + in.bytes()) {
    fail("input and output buffers overlap but are not the in-place layout of this operation");
  }
}

}  // namespace strata::runtime
