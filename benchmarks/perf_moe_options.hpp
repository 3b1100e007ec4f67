// strata-perf moe: the options, and the routing every rank derives alike (pure functions, so the
// tests check them alone). The benchmark itself is perf_moe.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "strata/types.hpp"

namespace perf {

struct MoeOptions {
  int tokens = 4096;  ///< T: tokens per rank
  int hidden = 2048;  ///< H: elements per token
  int top_k = 2;      ///< k: experts per token
  int experts = 8;    ///< E: over all ranks, E / ranks on each
  double skew = 0;    ///< Zipf exponent of the experts' popularity (0: uniform)
  strata::DataType dtype = strata::DataType::bf16;
  int iters = 20, warmup = 5;
  bool check = true;
  bool compare_mpi = false;
  bool help = false;  ///< -h/--help among the flags
};

/// Parses `strata-perf moe [flags]` (argv[1] is "moe"); nullopt with `error` set on bad input.
std::optional<MoeOptions> parse_moe(int argc, char** argv, std::string& error);
std::string moe_usage();

/// The experts (ids in [0, E)) each of rank `rank`'s T tokens goes to, k per token, distinct,
/// drawn by popularity: the experts in a fixed shuffled order, the i-th drawing (i + 1)^-skew. A
/// function of the options and the rank only, so every rank knows what every other sends.
std::vector<int> route(const MoeOptions& o, int rank);

}  // namespace perf
