#include "kernels/reduce_kernels.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace strata::kernels {
namespace {

// Loops are written over restrict-free raw pointers with simple bodies so that -O3 vectorizes them.
template <typename T, typename F>
void apply(T* out, const T* a, const T* b, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
}

// Integer sums and products wrap around (two's complement), as in NCCL and MPI; computing them in
// the unsigned type makes that defined behaviour instead of signed overflow.
template <typename T, bool = std::is_integral_v<T>>
struct WideOf {
  using type = T;  // floating point: computed as is
};
template <typename T>
struct WideOf<T, true> {
  using type = std::make_unsigned_t<decltype(T() + 0)>;  // after integer promotion
};
template <typename T>
using Wide = typename WideOf<T>::type;

template <typename T>
void reduce_typed(T* out, const T* a, const T* b, size_t n, ReduceOp op) {
  using W = Wide<T>;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      apply(out, a, b, n, [](T x, T y) { return T(W(x) + W(y)); });
      break;
    case ReduceOp::prod:
      apply(out, a, b, n, [](T x, T y) { return T(W(x) * W(y)); });
      break;
    case ReduceOp::min:
      apply(out, a, b, n, [](T x, T y) { return std::min(x, y); });
      break;
    case ReduceOp::max:
      apply(out, a, b, n, [](T x, T y) { return std::max(x, y); });
      break;
    case ReduceOp::band:
    case ReduceOp::bor:
    case ReduceOp::bxor:
      if constexpr (std::is_integral_v<T>) {
        if (op == ReduceOp::band) apply(out, a, b, n, [](T x, T y) { return T(x & y); });
        if (op == ReduceOp::bor) apply(out, a, b, n, [](T x, T y) { return T(x | y); });
        if (op == ReduceOp::bxor) apply(out, a, b, n, [](T x, T y) { return T(x ^ y); });
      }
      break;  // floating point: refused by supports() before any call
  }
}

// boolean: bytes holding 0 or 1. sum and max are "or", prod and min are "and" (as torch does).
void reduce_bool(uint8_t* out, const uint8_t* a, const uint8_t* b, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::max:
    case ReduceOp::bor:
      apply(out, a, b, n, [](uint8_t x, uint8_t y) { return uint8_t(x | y); });
      break;
    case ReduceOp::prod:
    case ReduceOp::min:
    case ReduceOp::band:
      apply(out, a, b, n, [](uint8_t x, uint8_t y) { return uint8_t(x & y); });
      break;
    case ReduceOp::bxor:
      apply(out, a, b, n, [](uint8_t x, uint8_t y) { return uint8_t(x ^ y); });
      break;
    case ReduceOp::avg:
      break;  // refused by supports()
  }
}

// Complex numbers as (re, im) pairs of R: sum and prod only (min and max have no order).
template <typename R>
void reduce_complex(R* out, const R* a, const R* b, size_t n, ReduceOp op) {
  if (op == ReduceOp::sum || op == ReduceOp::avg) {
    apply(out, a, b, 2 * n, [](R x, R y) { return x + y; });
  } else if (op == ReduceOp::prod) {
    for (size_t i = 0; i < n; ++i) {
      const R ar = a[2 * i], ai = a[2 * i + 1], br = b[2 * i], bi = b[2 * i + 1];
      out[2 * i] = ar * br - ai * bi;
      out[2 * i + 1] = ar * bi + ai * br;
    }
  }
}

// 16-bit floats: widen, operate in float, round back.
template <typename H, typename Widen, typename Narrow>
void reduce_half(H* out, const H* a, const H* b, size_t n, ReduceOp op, Widen w, Narrow nr) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      apply(out, a, b, n, [&](H x, H y) { return nr(w(x) + w(y)); });
      break;
    case ReduceOp::prod:
      apply(out, a, b, n, [&](H x, H y) { return nr(w(x) * w(y)); });
      break;
    case ReduceOp::min:
      apply(out, a, b, n, [&](H x, H y) { return w(y) < w(x) ? y : x; });
      break;
    case ReduceOp::max:
      apply(out, a, b, n, [&](H x, H y) { return w(x) < w(y) ? y : x; });
      break;
    case ReduceOp::band:
    case ReduceOp::bor:
    case ReduceOp::bxor:
      break;  // refused by supports()
  }
}

template <typename T>
void divide_typed(T* d, size_t n, int k) {
  if constexpr (std::is_unsigned_v<T>) {
    for (size_t i = 0; i < n; ++i) d[i] = T(uint64_t(d[i]) / uint64_t(k));
  } else if constexpr (std::is_integral_v<T>) {
    for (size_t i = 0; i < n; ++i) d[i] = T(int64_t(d[i]) / k);
  } else {
    for (size_t i = 0; i < n; ++i) d[i] = d[i] / T(k);
  }
}

}  // namespace

// Compiled for AVX-512, AVX2 and baseline x86-64, picked at load time; flatten inlines the typed
// loops into each clone so they vectorize for its instruction set.
__attribute__((target_clones("avx512f", "avx2", "default"), flatten)) void reduce(
    void* out, const void* a, const void* b, size_t n, DataType dtype, ReduceOp op) {
  switch (dtype) {
    case DataType::f32:
      reduce_typed(static_cast<float*>(out), static_cast<const float*>(a),
                   static_cast<const float*>(b), n, op);
      break;
    case DataType::f64:
      reduce_typed(static_cast<double*>(out), static_cast<const double*>(a),
                   static_cast<const double*>(b), n, op);
      break;
    case DataType::i8:
      reduce_typed(static_cast<int8_t*>(out), static_cast<const int8_t*>(a),
                   static_cast<const int8_t*>(b), n, op);
      break;
    case DataType::u8:
      reduce_typed(static_cast<uint8_t*>(out), static_cast<const uint8_t*>(a),
                   static_cast<const uint8_t*>(b), n, op);
      break;
    case DataType::i32:
      reduce_typed(static_cast<int32_t*>(out), static_cast<const int32_t*>(a),
                   static_cast<const int32_t*>(b), n, op);
      break;
    case DataType::i64:
      reduce_typed(static_cast<int64_t*>(out), static_cast<const int64_t*>(a),
                   static_cast<const int64_t*>(b), n, op);
      break;
    case DataType::i16:
      reduce_typed(static_cast<int16_t*>(out), static_cast<const int16_t*>(a),
                   static_cast<const int16_t*>(b), n, op);
      break;
    case DataType::u32:
      reduce_typed(static_cast<uint32_t*>(out), static_cast<const uint32_t*>(a),
                   static_cast<const uint32_t*>(b), n, op);
      break;
    case DataType::u64:
      reduce_typed(static_cast<uint64_t*>(out), static_cast<const uint64_t*>(a),
                   static_cast<const uint64_t*>(b), n, op);
      break;
    case DataType::boolean:
      reduce_bool(static_cast<uint8_t*>(out), static_cast<const uint8_t*>(a),
                  static_cast<const uint8_t*>(b), n, op);
      break;
    case DataType::c64:
      reduce_complex(static_cast<float*>(out), static_cast<const float*>(a),
                     static_cast<const float*>(b), n, op);
      break;
    case DataType::c128:
      reduce_complex(static_cast<double*>(out), static_cast<const double*>(a),
                     static_cast<const double*>(b), n, op);
      break;
    case DataType::f16:
      reduce_half(
          static_cast<f16_t*>(out), static_cast<const f16_t*>(a), static_cast<const f16_t*>(b), n,
          op, [](f16_t v) { return to_float(v); }, [](float v) { return to_f16(v); });
      break;
    case DataType::bf16:
      reduce_half(
          static_cast<bf16_t*>(out), static_cast<const bf16_t*>(a), static_cast<const bf16_t*>(b),
          n, op, [](bf16_t v) { return to_float(v); }, [](float v) { return to_bf16(v); });
      break;
  }
}

void divide_by(void* data, size_t n, DataType dtype, int k) {
  switch (dtype) {
    case DataType::f32:
      divide_typed(static_cast<float*>(data), n, k);
      break;
    case DataType::f64:
      divide_typed(static_cast<double*>(data), n, k);
      break;
    case DataType::i8:
      divide_typed(static_cast<int8_t*>(data), n, k);
      break;
    case DataType::u8:
      divide_typed(static_cast<uint8_t*>(data), n, k);
      break;
    case DataType::i32:
      divide_typed(static_cast<int32_t*>(data), n, k);
      break;
    case DataType::i64:
      divide_typed(static_cast<int64_t*>(data), n, k);
      break;
    case DataType::i16:
      divide_typed(static_cast<int16_t*>(data), n, k);
      break;
    case DataType::u32:
      divide_typed(static_cast<uint32_t*>(data), n, k);
      break;
    case DataType::u64:
      divide_typed(static_cast<uint64_t*>(data), n, k);
      break;
    case DataType::c64:
      divide_typed(static_cast<float*>(data), 2 * n, k);
      break;
    case DataType::c128:
      divide_typed(static_cast<double*>(data), 2 * n, k);
      break;
    case DataType::boolean:
      break;  // avg is refused for boolean
    case DataType::f16: {
      auto* d = static_cast<f16_t*>(data);
      for (size_t i = 0; i < n; ++i) d[i] = to_f16(to_float(d[i]) / float(k));
      break;
    }
    case DataType::bf16: {
      auto* d = static_cast<bf16_t*>(data);
      for (size_t i = 0; i < n; ++i) d[i] = to_bf16(to_float(d[i]) / float(k));
      break;
    }
  }
}

bool supports(DataType dtype, ReduceOp op) {
  const bool bitwise = op == ReduceOp::band || op == ReduceOp::bor || op == ReduceOp::bxor;
  switch (dtype) {
    case DataType::f32:
    case DataType::f64:
    case DataType::f16:
    case DataType::bf16:
      return !bitwise;
    case DataType::c64:
    case DataType::c128:
      return op == ReduceOp::sum || op == ReduceOp::prod || op == ReduceOp::avg;
    case DataType::boolean:
      return op != ReduceOp::avg;
    case DataType::i8:
    case DataType::u8:
    case DataType::i16:
    case DataType::i32:
    case DataType::i64:
    case DataType::u32:
    case DataType::u64:
      return true;
  }
  return false;
}

}  // namespace strata::kernels
