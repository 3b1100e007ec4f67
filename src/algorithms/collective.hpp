// The collective kinds and one call's arguments, as every layer from the runtime down sees them.
// A kind's Shape says what the runtime needs to know of it without a switch: how big a call is
// for the choice, what the flight recorder and STRATA_CHECK show, whether it has a root.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "strata/types.hpp"

namespace strata::algo {

enum class Collective : uint8_t {
  all_reduce,
  reduce_scatter,
  all_gather,
  all_to_all,
  all_to_allv,
  broadcast,
  reduce,
  gather,
  scatter,
  barrier,
};
constexpr size_t kCollectives = size_t(Collective::barrier) + 1;

/// One call, as every algorithm of its collective reads it. Counts are in elements.
struct Args {
  const void* in = nullptr;
  void* out = nullptr;
  /// all_reduce, broadcast, reduce: the buffer; reduce_scatter, scatter: one rank's block (the
  /// output); all_gather, gather: one rank's block (the input); all_to_all: one (source,
  /// destination) block; all_to_allv: the whole input; barrier: 0.
  size_t count = 0;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;  ///< reductions
  int root = -1;                ///< broadcast, reduce, gather, scatter
  /// all_to_all(v): per-rank counts and displacements, in elements.
  const size_t *send_counts = nullptr, *send_displs = nullptr;
  const size_t *recv_counts = nullptr, *recv_displs = nullptr;
  size_t bytes() const { return count * dtype_size(dtype); }
};

/// What a collective kind is, for the runtime's one dispatch path (runtime/calls.cpp).
struct Shape {
  std::string_view name;  ///< as errors, STRATA_ALGO and the choice log spell it
  bool reduces = false;   ///< takes Args::op
  bool rooted = false;    ///< takes Args::root
  /// The choice sees Args::bytes() times the group's size (the data one rank holds in all).
  bool chooses_by_all_blocks = false;
  /// all_to_all: the runtime lays out equal counts and displacements; all_to_allv: it keeps a
  /// copy of the caller's, which the queued call reads.
  bool equal_blocks = false, given_blocks = false;
  /// The ranks' sizes differ (all_to_allv): the choice sees 0 bytes, so that every rank makes
  /// the same one.
  bool sizes_differ = false;
};
const Shape& shape(Collective c);
inline std::string_view collective_name(Collective c) { return shape(c).name; }

}  // namespace strata::algo
