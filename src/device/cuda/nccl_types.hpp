// Strata's dtypes, reductions and errors in NCCL's terms: pure functions, unit-tested on builds
// with NCCL's header and no GPU (tests/device/nccl_types_test.cpp).
#pragma once

#include <nccl.h>

#include <optional>
#include <string>

#include "strata/types.hpp"

namespace strata::device {

/// NCCL's type for `dt`; none for those NCCL lacks (i16, complex). boolean travels as u8.
std::optional<ncclDataType_t> nccl_dtype(DataType dt);
/// NCCL's reduction for `op`; none for the bitwise ones.
std::optional<ncclRedOp_t> nccl_op(ReduceOp op);
/// "ncclAllReduce failed: invalid argument (NCCL: its last error)", from NCCL's text for the
/// result (ncclGetErrorString) and its last error.
std::string nccl_failure(const char* call, const char* reason, const char* last_error);

}  // namespace strata::device
