// strata-perf's command line, parsed into Options (nccl-tests flags plus --compare/--json/--plot).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "strata/types.hpp"

namespace perf {

enum class Coll {
  all_reduce,
  all_gather,
  reduce_scatter,
  all_to_all,
  all_to_allv,
  broadcast,
  reduce,
  sendrecv
};

struct Options {
  Coll coll = Coll::all_reduce;
  size_t min_bytes = 32 << 20, max_bytes = 32 << 20;
  double factor = 2;      // -f; 0 when -i (linear steps) is used
  size_t step_bytes = 0;  // -i
  int iters = 20, warmup = 5;
  bool check = true, blocking = false;
  int root = 0;
  std::vector<strata::DataType> dtypes = {strata::DataType::f32};
  std::vector<strata::ReduceOp> ops = {strata::ReduceOp::sum};
  /// all_to_allv: the Zipf exponent of the destinations' shares (--skew zipf:S; 0 = even).
  double skew = 0;
  bool compare_mpi = false;
  /// --compare nccl: raw NCCL on the same device buffers (with --device cuda).
  bool compare_nccl = false;
  /// --device cuda: the buffers in CUDA device memory (docs/device.md).
  bool device = false;
  /// -R 2: host buffers from Communicator::alloc_symmetric (nccl-tests' -R 2, symmetric
  /// registration).
  bool symmetric = false;
  /// --fresh: every rank rewrites its input before every call (timed with it, for both
  /// libraries; calls are then blocking): as a training step produces new data, so that no
  /// peer's cached copy of an unchanged input flatters a path that reads it in place.
  bool fresh = false;
  std::string json, plot;
  bool help = false;  // -h/--help among the flags: print the usage and exit
};

/// Parses argv; nullopt with `error` set on bad input ("-b: '12Q' is not a size").
std::optional<Options> parse(int argc, char** argv, std::string& error);
/// The size after `bytes` in the sweep (-f or -i), always larger (a factor near 1 on a small
/// size still moves on); nullopt past -e, or after a size of 0.
std::optional<size_t> next_size(size_t bytes, const Options& o);
/// "8", "64K", "1M", "2G" -> bytes (powers of 1024); nullopt if malformed.
std::optional<size_t> parse_size(const std::string& s);
/// "zipf:S" -> S (0 <= S <= 100; --skew's value); nullopt if malformed.
std::optional<double> parse_zipf(const std::string& s);
std::string usage();
const char* coll_name(Coll c);
/// nccl-tests' type names: float, double, half, bfloat16, int8, uint8, int32, int64.
const char* nccl_type_name(strata::DataType t);
/// Whether the collective reduces (has a redop column) and has a root.
bool has_op(Coll c);
bool has_root(Coll c);
/// Bus bandwidth factor for n ranks: 2(n-1)/n all-reduce, (n-1)/n gather/scatter/all-to-all, 1
/// else.
double bus_factor(Coll c, int n);

}  // namespace perf
