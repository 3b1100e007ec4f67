// Element types, reduction operators, memory kinds and buffer views: the vocabulary every
// collective call is written in.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

namespace strata {

/// The clock of every deadline and timing in Strata.
using Clock = std::chrono::steady_clock;

/// Bytes a collective moves per rank in nccl-tests' "bus" sense, so that bus bytes / seconds
/// compares with a link's bandwidth whatever the collective and the group size n. All-reduce of
/// `bytes` per rank: 2(n-1)/n x bytes.
constexpr double all_reduce_bus_bytes(double bytes, int n) {
  return n > 1 ? 2.0 * (n - 1) / n * bytes : 0.0;
}
/// All-gather, reduce-scatter or all-to-all whose full (gathered) buffer is `total` bytes:
/// (n-1)/n x total.
constexpr double gather_bus_bytes(double total, int n) {
  return n > 1 ? double(n - 1) / n * total : 0.0;
}

/// Element type of a buffer. f16 is IEEE binary16, bf16 is bfloat16 (both stored as 16 bits);
/// boolean is one byte holding 0 or 1; c64 and c128 are complex float and double (re, im).
enum class DataType : uint8_t {
  f32,
  f64,
  f16,
  bf16,
  i8,
  u8,
  i32,
  i64,
  boolean,
  i16,
  u32,
  u64,
  c64,
  c128
};
/// The last DataType, for range checks of values that crossed a language boundary.
inline constexpr DataType kLastDataType = DataType::c128;

/// Reduction operator. `avg` is sum divided by the group size (integer types truncate); band,
/// bor and bxor are bitwise and are defined for integers and boolean only; complex types take
/// sum, prod and avg only. On boolean, sum and max are "or", prod and min are "and", and avg is
/// refused (an average of truth values is not one). The values
/// are NCCL's and the C ABI's (strataMax is 2), and Python's strata.ReduceOp has them too.
enum class ReduceOp : uint8_t { sum, prod, max, min, avg, band, bor, bxor };
/// The last ReduceOp, for range checks.
inline constexpr ReduceOp kLastReduceOp = ReduceOp::bxor;

/// Where a buffer lives. Host memory goes over UCX; CUDA device memory over NCCL (when built).
enum class MemoryKind : uint8_t { host, cuda };

/// Size in bytes of one element of `t` (0 for a value outside the enumeration). Inline: every
/// call computes it several times.
constexpr size_t dtype_size(DataType t) {
  switch (t) {
    case DataType::c128:
      return 16;
    case DataType::f64:
    case DataType::i64:
    case DataType::u64:
    case DataType::c64:
      return 8;
    case DataType::f32:
    case DataType::i32:
    case DataType::u32:
      return 4;
    case DataType::f16:
    case DataType::bf16:
    case DataType::i16:
      return 2;
    case DataType::i8:
    case DataType::u8:
    case DataType::boolean:
      return 1;
  }
  return 0;
}
/// Short lowercase name ("f32", "bf16", ...), as used in logs and benchmark tables.
std::string_view dtype_name(DataType t);
/// Name of the operator ("sum", "avg", ...).
std::string_view op_name(ReduceOp op);

/// 16-bit floating point storage types. Arithmetic goes through float.
struct f16_t {
  uint16_t bits;
};
struct bf16_t {
  uint16_t bits;
};

/// Maps a C++ element type to its DataType (f16_t/bf16_t for the 16-bit floats).
template <typename T>
constexpr DataType dtype_of() = delete;  // no Strata dtype for T
template <>
constexpr DataType dtype_of<float>() {
  return DataType::f32;
}
template <>
constexpr DataType dtype_of<double>() {
  return DataType::f64;
}
template <>
constexpr DataType dtype_of<f16_t>() {
  return DataType::f16;
}
template <>
constexpr DataType dtype_of<bf16_t>() {
  return DataType::bf16;
}
template <>
constexpr DataType dtype_of<int8_t>() {
  return DataType::i8;
}
template <>
constexpr DataType dtype_of<uint8_t>() {
  return DataType::u8;
}
template <>
constexpr DataType dtype_of<int32_t>() {
  return DataType::i32;
}
template <>
constexpr DataType dtype_of<int64_t>() {
  return DataType::i64;
}
template <>
constexpr DataType dtype_of<bool>() {
  return DataType::boolean;
}
template <>
constexpr DataType dtype_of<int16_t>() {
  return DataType::i16;
}
template <>
constexpr DataType dtype_of<uint32_t>() {
  return DataType::u32;
}
template <>
constexpr DataType dtype_of<uint64_t>() {
  return DataType::u64;
}

/// A non-owning view of `count` elements of `dtype` at `data`, in memory of kind `memory`.
/// Collectives take views; the caller keeps the memory alive until the operation's Work completes.
struct Buffer {
  void* data = nullptr;
  size_t count = 0;
  DataType dtype = DataType::f32;
  MemoryKind memory = MemoryKind::host;

  size_t bytes() const { return count * dtype_size(dtype); }
};

/// View of a typed host span, dtype deduced: `strata::buffer(std::span<float>(v))`.
template <typename T>
Buffer buffer(std::span<T> s, MemoryKind memory = MemoryKind::host) {
  using E = std::remove_const_t<T>;
  return Buffer{const_cast<E*>(s.data()), s.size(), dtype_of<E>(), memory};
}

/// Convenience for contiguous containers (std::vector, std::array).
template <typename C>
requires requires(C& c) {
  c.data();
  c.size();
}
Buffer buffer(C& c, MemoryKind memory = MemoryKind::host) {
  return buffer(std::span(c.data(), c.size()), memory);
}

/// Conversions for the 16-bit float types (round to nearest even).
float to_float(f16_t v);
float to_float(bf16_t v);
f16_t to_f16(float v);
bf16_t to_bf16(float v);

}  // namespace strata
