// strata-perf's output, in nccl-tests' layout: header, one row per size, footer. Pure formatting,
// so it is tested against a fixed sample.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "perf_options.hpp"

namespace perf {

/// Timing of one placement (out-of-place or in-place).
struct Measure {
  bool available = true;  // false: placement not supported (printed N/A)
  double time_us = 0;
  double algbw = 0, busbw = 0;  // GB/s, GB = 1e9 B
  std::optional<long> wrong;    // nullopt when not checked
};

struct Row {
  size_t bytes = 0, count = 0;
  const char* type = "float";
  const char* redop = "none";
  int root = -1;
  Measure out_of_place, in_place;
  std::optional<double> mpi_busbw;   // with --compare mpi
  std::optional<double> nccl_us;     // with --compare nccl: raw NCCL's time per call
  std::optional<double> nccl_ip_us;  // and in place
};

/// With `compare_nccl`, the last columns are vs_nccl and vs_nccl_ip: raw NCCL's time over
/// Strata's, out of place and in place (its busbw ratio; defined on one rank too, where busbw
/// is 0).
std::string header(bool compare_mpi, bool compare_nccl = false);
std::string format_row(const Row& r, bool compare_mpi, bool compare_nccl = false);
/// Footer: wrong-value summary and the average bus bandwidth over both placements of all rows.
std::string footer(const std::vector<Row>& rows);
/// algbw and busbw of moving `bytes` in `time_us` on n ranks.
Measure measure(Coll c, int n, size_t bytes, double time_us);

}  // namespace perf
