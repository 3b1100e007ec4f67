#include "strata/types.hpp"

#include <bit>
#include <cstring>

namespace strata {

std::string_view dtype_name(DataType t) {
  switch (t) {
    case DataType::f32:
      return "f32";
    case DataType::f64:
      return "f64";
    case DataType::f16:
      return "f16";
    case DataType::bf16:
      return "bf16";
    case DataType::i8:
      return "i8";
    case DataType::u8:
      return "u8";
    case DataType::i32:
      return "i32";
    case DataType::i64:
      return "i64";
    case DataType::boolean:
      return "bool";
    case DataType::i16:
      return "i16";
    case DataType::u32:
      return "u32";
    case DataType::u64:
      return "u64";
    case DataType::c64:
      return "c64";
    case DataType::c128:
      return "c128";
  }
  return "?";
}

std::string_view op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::prod:
      return "prod";
    case ReduceOp::min:
      return "min";
    case ReduceOp::max:
      return "max";
    case ReduceOp::avg:
      return "avg";
    case ReduceOp::band:
      return "band";
    case ReduceOp::bor:
      return "bor";
    case ReduceOp::bxor:
      return "bxor";
  }
  return "?";
}

// bf16 is the top half of an f32: round to nearest even on the dropped 16 bits, keep NaN quiet.
float to_float(bf16_t v) { return std::bit_cast<float>(uint32_t(v.bits) << 16); }

bf16_t to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16_t{uint16_t((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16_t{uint16_t(u >> 16)};
}

// IEEE binary16 via the compiler's _Float16 (x86-64 gcc 12 converts with correct rounding).
float to_float(f16_t v) {
  _Float16 h;
  std::memcpy(&h, &v.bits, 2);
  return float(h);
}

f16_t to_f16(float f) {
  _Float16 h = static_cast<_Float16>(f);
  f16_t r;
  std::memcpy(&r.bits, &h, 2);
  return r;
}

}  // namespace strata
