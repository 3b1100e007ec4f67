// The tensors of torch's list operations (allgather, gather, scatter, alltoall, coalesced calls)
// in Strata's terms: one dtype across a list, blocks of one size, flattening into one contiguous
// buffer and back, PREMUL_SUM's factor applied, and all_to_all_single's splits.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tensors.hpp"

namespace strata::torch_backend {

/// All tensors of a list operation share one dtype and live on the CPU.
void check_same_dtype(const std::vector<at::Tensor>& ts, at::ScalarType dtype, const char* op);
/// Each of `ts` is one rank's block: as many elements as `like`, which is the `like_role` ("an
/// input") of this rank, and its dtype.
void check_blocks(const std::vector<at::Tensor>& ts, const at::Tensor& like, const char* op,
                  const char* role, const char* like_role);
/// The tensors concatenated, flat and contiguous: what a list operation sends.
at::Tensor flat_cat(const std::vector<at::Tensor>& ts);
/// Copies consecutive blocks of `flat` into `ts` (the reverse of flat_cat).
void scatter_into(const at::Tensor& flat, const std::vector<at::Tensor>& ts);
/// `t` multiplied by the PREMUL_SUM factor, as a new tensor (the caller's input stays unchanged).
at::Tensor premultiplied(const at::Tensor& t, const Reduction& r);
/// Exclusive prefix sums of `counts`: where each rank's block starts.
std::vector<size_t> displacements(const std::vector<size_t>& counts);
/// Elements per rank of one side of all_to_all_single: `splits` rows of `row` elements each, or
/// the first dimension divided evenly when `splits` is empty.
std::vector<size_t> split_counts(const at::Tensor& t, const std::vector<int64_t>& splits, int size,
                                 const char* side);

}  // namespace strata::torch_backend
