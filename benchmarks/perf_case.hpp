// One benchmark case: a collective on buffers of a given size, dtype, op and placement. Knows how
// to issue it through Strata, how to fill its inputs with test data and how to count wrong
// output elements against an independently computed expectation.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "perf_options.hpp"
#include "strata/strata.hpp"

namespace perf {

/// Stores to every cache line of `b` (each line's first byte incremented): what a step that
/// produces new data does to a collective's input before the call (--fresh).
void rewrite(const strata::Buffer& b);

struct Case {
  Coll coll;
  strata::DataType dtype;
  strata::ReduceOp op;
  int root;
  size_t count;  // elements in the nccl-tests "size" (whole buffer; see element counts below)
  bool in_place;

  int rank, n;
  double skew = 0;  ///< all_to_allv: Zipf exponent of the destinations' shares
  /// all_to_allv's arguments on this rank, in elements, blocks in rank order without gaps: every
  /// rank sends rank j the share (j + 1)^-skew of its `count` (the rest, one element each, to the
  /// lowest ranks), so every sender lays out its input alike. Filled by lay_out().
  struct Displacements {
    std::vector<size_t> send_counts, send_displs, recv_counts, recv_displs;
  };
  Displacements v;
  void lay_out();
  size_t in_count() const;   // elements of this rank's input
  size_t out_count() const;  // elements of this rank's output
  bool supported() const;    // in-place all_to_all(v) and sendrecv are not
  size_t bytes() const { return count * strata::dtype_size(dtype); }

  /// Input and output views into the two benchmark buffers (`a` holds the input unless in place).
  strata::Buffer input(std::span<uint8_t> a, std::span<uint8_t> b) const;
  strata::Buffer output(std::span<uint8_t> a, std::span<uint8_t> b) const;
  strata::Work issue(strata::Communicator& c, strata::Buffer in, strata::Buffer out) const;

  /// Writes this rank's test input; returns the number of wrong output elements after one run.
  void fill_input(strata::Buffer in) const;
  long count_wrong(strata::Buffer out) const;
};

}  // namespace perf
