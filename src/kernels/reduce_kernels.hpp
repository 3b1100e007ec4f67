// Element-wise reduction kernels used by every reducing algorithm.
//
// `avg` reduces as `sum`; the algorithm calls divide_by() once on the final sum, so every rank and
// every algorithm rounds the same way. 16-bit floats are widened to float for each operation and
// rounded back, which keeps results identical whichever rank performs a step.
#pragma once

#include <cstddef>

#include "strata/types.hpp"

namespace strata::kernels {

/// out[i] = a[i] op b[i]. `out` may alias `a` or `b`.
void reduce(void* out, const void* a, const void* b, size_t count, DataType dtype, ReduceOp op);

/// data[i] = data[i] / n (integer types truncate toward zero). Used to finish `avg`.
void divide_by(void* data, size_t count, DataType dtype, int n);

/// True when `op` is defined for `dtype` (see ReduceOp): the one place that says so.
bool supports(DataType dtype, ReduceOp op);

}  // namespace strata::kernels
