#include "tensor_lists.hpp"

#include <c10/util/Exception.h>

#include <numeric>

namespace strata::torch_backend {

// All tensors of a list operation share one dtype and live on the CPU.
void check_same_dtype(const std::vector<at::Tensor>& ts, at::ScalarType dtype, const char* op) {
  for (const auto& t : ts) {
    check_tensor(t, op);
    TORCH_CHECK_TYPE(t.scalar_type() == dtype, "strata ", op, ": tensors of dtype ",
                     t.scalar_type(), " and ", dtype, " in one call");
  }
}

// Each of `ts` is one rank's block: as many elements as `like`, which is the `like_role` ("an
// input") of this rank, and its dtype.
void check_blocks(const std::vector<at::Tensor>& ts, const at::Tensor& like, const char* op,
                  const char* role, const char* like_role) {
  check_same_dtype(ts, like.scalar_type(), op);
  for (const auto& t : ts) {
    TORCH_CHECK_VALUE(t.numel() == like.numel(), "strata ", op, ": ", role, " of ", t.numel(),
                      " elements for ", like_role, " of ", like.numel());
  }
}

// The tensors concatenated, flat and contiguous: what a list operation sends.
at::Tensor flat_cat(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> flat;
  flat.reserve(ts.size());
  for (const auto& t : ts) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

// Copies consecutive blocks of `flat` into `ts` (the reverse of flat_cat).
void scatter_into(const at::Tensor& flat, const std::vector<at::Tensor>& ts) {
  int64_t at = 0;
  for (const auto& t : ts) {
    t.copy_(flat.narrow(0, at, t.numel()).view(t.sizes()));
    at += t.numel();
  }
}

// `t` multiplied by the PREMUL_SUM factor, as a new tensor (the caller's input stays unchanged).
at::Tensor premultiplied(const at::Tensor& t, const Reduction& r) {
  return r.premul ? (t * *r.premul).contiguous() : t;
}

std::vector<size_t> displacements(const std::vector<size_t>& counts) {
  std::vector<size_t> d(counts.size(), 0);
  std::exclusive_scan(counts.begin(), counts.end(), d.begin(), size_t{0});
  return d;
}

// Elements per rank of one side of all_to_all_single: `splits` rows of `row` elements each, or
// the first dimension divided evenly when `splits` is empty.
std::vector<size_t> split_counts(const at::Tensor& t, const std::vector<int64_t>& splits, int size,
                                 const char* side) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const int64_t row = rows == 0 ? 0 : t.numel() / rows;
  std::vector<size_t> counts(size);
  if (splits.empty()) {
    TORCH_CHECK_VALUE(rows % size == 0, "strata all_to_all_single: ", side, " has ", rows,
                      " rows, not divisible by the group size ", size);
    for (auto& c : counts) c = size_t(rows / size * row);
    return counts;
  }
  TORCH_CHECK_VALUE(int(splits.size()) == size, "strata all_to_all_single: ", splits.size(), " ",
                    side, " splits for a group of ", size);
  int64_t total = 0;
  for (int r = 0; r < size; ++r) {
    TORCH_CHECK_VALUE(splits[r] >= 0, "strata all_to_all_single: negative ", side, " split ",
                      splits[r], " for rank ", r);
    counts[r] = size_t(splits[r] * row);
    total += splits[r];
  }
  TORCH_CHECK_VALUE(total == rows, "strata all_to_all_single: ", side, " splits sum to ", total,
                    " but the tensor has ", rows, " rows");
  return counts;
}

}  // namespace strata::torch_backend
