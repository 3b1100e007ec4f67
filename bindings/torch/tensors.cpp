#include "tensors.hpp"

#include <c10/util/Exception.h>

#include "call_stream.hpp"

namespace strata::torch_backend {
namespace {

std::optional<DataType> strata_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return DataType::f32;
    case at::kDouble:
      return DataType::f64;
    case at::kHalf:
      return DataType::f16;
    case at::kBFloat16:
      return DataType::bf16;
    case at::kChar:
      return DataType::i8;
    case at::kByte:
      return DataType::u8;
    case at::kShort:
      return DataType::i16;
    case at::kInt:
      return DataType::i32;
    case at::kLong:
      return DataType::i64;
    case at::kUInt32:
      return DataType::u32;
    case at::kUInt64:
      return DataType::u64;
    case at::kBool:
      return DataType::boolean;
    case at::kComplexFloat:
      return DataType::c64;
    case at::kComplexDouble:
      return DataType::c128;
    default:
      return std::nullopt;
  }
}

}  // namespace

void check_tensor(const at::Tensor& t, const char* op) {
  TORCH_CHECK_VALUE(t.defined(), "strata ", op, ": undefined tensor");
  TORCH_CHECK_VALUE(t.device().is_cpu() || (t.is_cuda() && cuda_tensors_supported()), "strata ", op,
                    ": tensor on ", t.device(), "; this strata build takes ",
                    cuda_tensors_supported() ? "CPU and CUDA tensors"
                                             : "CPU tensors (it was built without CUDA)");
  TORCH_CHECK_VALUE(t.layout() == at::kStrided, "strata ", op, ": ", t.layout(),
                    " tensor; only dense (strided) tensors are supported");
  TORCH_CHECK_TYPE(strata_dtype(t.scalar_type()).has_value(), "strata ", op, ": dtype ",
                   t.scalar_type(), " is not supported (bool, int8-64, uint8/32/64, float16, ",
                   "bfloat16, float32/64, complex64/128 are)");
}

Buffer view(const at::Tensor& t, const char* op) {
  check_tensor(t, op);
  TORCH_INTERNAL_ASSERT(t.is_contiguous(), "strata ", op, ": non-contiguous tensor not staged");
  return Buffer{t.data_ptr(), size_t(t.numel()), *strata_dtype(t.scalar_type()),
                t.is_cuda() ? MemoryKind::cuda : MemoryKind::host};
}

Reduction reduction(const c10d::ReduceOp& op, at::ScalarType dtype, const char* what) {
  Reduction r;
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      r.op = ReduceOp::sum;
      break;
    case c10d::ReduceOp::AVG:
      r.op = ReduceOp::avg;
      break;
    case c10d::ReduceOp::PRODUCT:
      r.op = ReduceOp::prod;
      break;
    case c10d::ReduceOp::MIN:
      r.op = ReduceOp::min;
      break;
    case c10d::ReduceOp::MAX:
      r.op = ReduceOp::max;
      break;
    case c10d::ReduceOp::BAND:
      r.op = ReduceOp::band;
      break;
    case c10d::ReduceOp::BOR:
      r.op = ReduceOp::bor;
      break;
    case c10d::ReduceOp::BXOR:
      r.op = ReduceOp::bxor;
      break;
    case c10d::ReduceOp::PREMUL_SUM: {
      auto* s = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK_VALUE(s != nullptr, "strata ", what, ": PREMUL_SUM without its factor");
      r.op = ReduceOp::sum;
      r.premul = s->tensor_factor.defined() ? s->tensor_factor.to(at::kCPU)
                                            : at::scalar_tensor(s->double_factor, at::kDouble);
      break;
    }
    default:
      TORCH_CHECK_VALUE(false, "strata ", what, ": unknown ReduceOp ", int(op.op_));
  }
  // On booleans sum and or are max, product and and are min (as ProcessGroupNCCL maps them):
  // the same results, in the reductions NCCL has.
  if (dtype == at::kBool) {
    if (r.op == ReduceOp::sum || r.op == ReduceOp::bor) r.op = ReduceOp::max;
    if (r.op == ReduceOp::prod || r.op == ReduceOp::band) r.op = ReduceOp::min;
  }
  // Whether `op` is defined for the dtype (no BAND on floats...) Strata's own check says when
  // the collective is issued, naming both.
  TORCH_CHECK_VALUE(!r.premul || at::isFloatingType(dtype) || at::isComplexType(dtype), "strata ",
                    what, ": PREMUL_SUM takes floating-point or complex tensors, not ", dtype);
  return r;
}

Staged::Staged(at::Tensor user, const char* op) : user_(std::move(user)), op_(op) {
  check_tensor(user_, op);
  flat_ = user_.is_contiguous() ? user_ : user_.contiguous();
}

Buffer Staged::buffer() const { return view(flat_, op_); }

void Staged::finish() const {
  if (!flat_.is_same(user_)) user_.copy_(flat_);
}

}  // namespace strata::torch_backend
