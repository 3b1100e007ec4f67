// Sum of sparse COO tensors across a group (torch's all_reduce on a sparse tensor, which gloo
// supports for SUM): every rank gathers every rank's indices and values and adds them up itself.
#pragma once

#include <ATen/ATen.h>

#include "strata/communicator.hpp"
#include "work.hpp"

namespace strata::torch_backend {

/// Issues the sum of `tensor` (sparse COO, CPU) over `comm` into `w`; on success the finisher
/// replaces `tensor`'s contents with the coalesced sum. Blocks on one small collective first:
/// every rank's number of non-zeros (to size the gathers) and its shape and dtype, which must be
/// the same everywhere (a c10::ValueError naming the first rank that differs, on every rank).
void issue_sparse_sum(Communicator& comm, const at::Tensor& tensor, StrataWork& w);

}  // namespace strata::torch_backend
