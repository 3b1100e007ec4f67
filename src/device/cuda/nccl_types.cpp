#include "device/cuda/nccl_types.hpp"

#include "device/nccl.hpp"

namespace strata::device {

std::optional<ncclDataType_t> nccl_dtype(DataType dt) {
  switch (dt) {
    case DataType::f32:
      return ncclFloat32;
    case DataType::f64:
      return ncclFloat64;
    case DataType::f16:
      return ncclFloat16;
    case DataType::bf16:
      return ncclBfloat16;
    case DataType::i8:
      return ncclInt8;
    case DataType::u8:
    case DataType::boolean:
      return ncclUint8;
    case DataType::i32:
      return ncclInt32;
    case DataType::u32:
      return ncclUint32;
    case DataType::i64:
      return ncclInt64;
    case DataType::u64:
      return ncclUint64;
    case DataType::i16:
    case DataType::c64:
    case DataType::c128:
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<ncclRedOp_t> nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::prod:
      return ncclProd;
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::min:
      return ncclMin;
    case ReduceOp::avg:
      return ncclAvg;
    case ReduceOp::band:
    case ReduceOp::bor:
    case ReduceOp::bxor:
      return std::nullopt;
  }
  return std::nullopt;
}

std::string nccl_refuses(DataType dt, std::optional<ReduceOp> op) {
  if (!nccl_dtype(dt)) return "NCCL has no " + std::string(dtype_name(dt)) + " type";
  if (!op) return {};
  if (!nccl_op(*op)) return "NCCL has no " + std::string(op_name(*op)) + " reduction";
  // As u8, max and min of 0/1 are or and and; a sum or product would leave 0/1.
  if (dt == DataType::boolean && *op != ReduceOp::max && *op != ReduceOp::min) {
    return "NCCL reduces boolean (as u8) by max and min only, not " + std::string(op_name(*op));
  }
  return {};
}

std::string nccl_failure(const char* call, const char* reason, const char* last_error) {
  std::string s = std::string(call) + " failed: " + reason;
  if (last_error && *last_error) s += " (NCCL: " + std::string(last_error) + ")";
  return s;
}

}  // namespace strata::device
