// torch tensors and reduce operators in Strata's terms: which dtypes and ops the backend takes,
// and the checks that reject anything else before a byte moves.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "strata/types.hpp"

namespace strata::torch_backend {

/// A strided, dense tensor in CPU or CUDA memory as a Strata buffer over its storage. The tensor
/// must be contiguous (callers stage non-contiguous ones, see Staged). Throws c10::TypeError
/// naming `op` when the dtype has no Strata equivalent, and c10::ValueError for other devices
/// (CUDA too where the build has no device path), sparse or quantized tensors.
Buffer view(const at::Tensor& t, const char* op);

/// Checks what view() checks without requiring contiguity.
void check_tensor(const at::Tensor& t, const char* op);

/// A reduction as Strata runs it: the op, and for PREMUL_SUM the factor each rank's input is
/// multiplied by first (then summed).
struct Reduction {
  ReduceOp op = ReduceOp::sum;
  std::optional<at::Tensor> premul;  // a scalar tensor (double_factor or tensor_factor)
};
/// Maps torch's ReduceOp; throws c10::ValueError for PREMUL_SUM on an integer `dtype` (the
/// other op and dtype pairs Strata checks itself when the collective is issued).
Reduction reduction(const c10d::ReduceOp& op, at::ScalarType dtype, const char* what);

/// A tensor the collective can read and write in place: the user's own tensor when it is
/// contiguous, else a contiguous copy that finish() copies back.
class Staged {
 public:
  Staged(at::Tensor user, const char* op);
  const at::Tensor& flat() const { return flat_; }
  Buffer buffer() const;
  void finish() const;  ///< copies the result back when the user's tensor was not contiguous

 private:
  at::Tensor user_;
  at::Tensor flat_;
  const char* op_;
};

}  // namespace strata::torch_backend
