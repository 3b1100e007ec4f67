#include "perf_options.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "strata/types.hpp"

namespace perf {
namespace {

const std::pair<const char*, Coll> kColls[] = {{"all_reduce", Coll::all_reduce},
                                               {"all_gather", Coll::all_gather},
                                               {"reduce_scatter", Coll::reduce_scatter},
                                               {"all_to_all", Coll::all_to_all},
                                               {"all_to_allv", Coll::all_to_allv},
                                               {"broadcast", Coll::broadcast},
                                               {"reduce", Coll::reduce},
                                               {"sendrecv", Coll::sendrecv}};

const strata::DataType kTypes[] = {
    strata::DataType::f32, strata::DataType::f64, strata::DataType::f16, strata::DataType::bf16,
    strata::DataType::i8,  strata::DataType::u8,  strata::DataType::i32, strata::DataType::i64};
const strata::ReduceOp kOps[] = {strata::ReduceOp::sum, strata::ReduceOp::prod,
                                 strata::ReduceOp::min, strata::ReduceOp::max,
                                 strata::ReduceOp::avg};

bool parse_int(const std::string& s, int& out) {
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end || v < 0 || v > 1000000000) return false;
  out = int(v);
  return true;
}

}  // namespace

std::optional<size_t> parse_size(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0) return std::nullopt;
  std::string suffix(end);
  double mult = 1;
  if (suffix == "K" || suffix == "k")
    mult = 1024.0;
  else if (suffix == "M" || suffix == "m")
    mult = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g")
    mult = 1024.0 * 1024 * 1024;
  else if (!suffix.empty())
    return std::nullopt;
  // A whole number of bytes that a size_t holds: "1.5" is not 1, and nan or 1e30 not anything.
  const double bytes = v * mult;
  if (!(bytes <= 0x1p62) || bytes != std::floor(bytes)) return std::nullopt;
  return size_t(bytes);
}

std::optional<size_t> next_size(size_t bytes, const Options& o) {
  if (bytes == 0) return std::nullopt;
  const double next =
      o.factor > 0 ? double(bytes) * o.factor : double(bytes) + double(o.step_bytes);
  if (!(next <= double(o.max_bytes))) return std::nullopt;  // also where the product overflows
  const size_t n = std::max(size_t(next), bytes + 1);
  if (n > o.max_bytes) return std::nullopt;
  return n;
}

std::optional<double> parse_zipf(const std::string& s) {
  if (s.rfind("zipf:", 0) != 0) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str() + 5, &end);
  if (end == s.c_str() + 5 || *end || !(v >= 0 && v <= 100)) return std::nullopt;
  return v;
}

const char* coll_name(Coll c) {
  for (auto& [name, v] : kColls) {
    if (v == c) return name;
  }
  return "?";
}

const char* nccl_type_name(strata::DataType t) {
  switch (t) {
    case strata::DataType::f32:
      return "float";
    case strata::DataType::f64:
      return "double";
    case strata::DataType::f16:
      return "half";
    case strata::DataType::bf16:
      return "bfloat16";
    case strata::DataType::i8:
      return "int8";
    case strata::DataType::u8:
      return "uint8";
    case strata::DataType::i32:
      return "int32";
    case strata::DataType::i64:
      return "int64";
    case strata::DataType::boolean:
      return "bool";
    case strata::DataType::i16:
      return "int16";
    case strata::DataType::u32:
      return "uint32";
    case strata::DataType::u64:
      return "uint64";
    case strata::DataType::c64:
      return "complex64";
    case strata::DataType::c128:
      return "complex128";
  }
  return "?";
}

bool has_op(Coll c) {
  return c == Coll::all_reduce || c == Coll::reduce_scatter || c == Coll::reduce;
}
bool has_root(Coll c) { return c == Coll::broadcast || c == Coll::reduce; }

double bus_factor(Coll c, int n) {
  switch (c) {
    case Coll::all_reduce:
      return strata::all_reduce_bus_bytes(1.0, n);
    case Coll::all_gather:
    case Coll::reduce_scatter:
    case Coll::all_to_all:
    case Coll::all_to_allv:
      return strata::gather_bus_bytes(1.0, n);
    default:
      return 1.0;
  }
}

std::string usage() {
  return "usage: strata-perf COLL [flags]      (one process per rank: mpirun, strata-run, srun)\n"
         "\n"
         "Times COLL over every rank as nccl-tests do, for a range of sizes, and prints one row\n"
         "per size: time in microseconds, algbw = bytes / time and busbw = algbw times the\n"
         "collective's bus factor (2(n-1)/n for all_reduce, (n-1)/n for all_gather,\n"
         "reduce_scatter and all_to_all(v), 1 otherwise), both in GB/s (1e9 bytes per second).\n"
         "SIZE is a rank's larger buffer, as in nccl-tests: all_gather's output, reduce_scatter's\n"
         "input, all_to_allv's input, the whole buffer of the others.\n"
         "\n"
         "  COLL: all_reduce all_gather reduce_scatter all_to_all all_to_allv broadcast reduce\n"
         "        sendrecv\n"
         "  (strata-perf moe --help: a mixture-of-experts layer's dispatch and combine)\n"
         "  -b SIZE  smallest size in bytes, K/M/G = 2^10/2^20/2^30 (default 32M)\n"
         "  -e SIZE  largest size in bytes (default 32M)\n"
         "  -f F     multiply the size by F each step (default 2)\n"
         "  -i SIZE  add SIZE bytes each step instead of multiplying\n"
         "  -n N     timed iterations per size (default 20)\n"
         "  -w N     untimed warm-up iterations per size (default 5)\n"
         "  -c 0|1   check every element against a reference (default 1)\n"
         "  -z 0|1   wait for each operation before issuing the next (default 0: issue all, wait\n"
         "           for all)\n"
         "  -d TYPE  f32 f64 f16 bf16 i8 u8 i32 i64 all (default f32)\n"
         "  -o OP    sum prod min max avg all (default sum; collectives that do not reduce\n"
         "           ignore it, as nccl-tests' do)\n"
         "  -r ROOT  root rank of broadcast and reduce (default 0; the others ignore it)\n"
         "  --skew zipf:S   all_to_allv: every rank sends rank j a share (j + 1)^-S of its input,\n"
         "                  as a router sends tokens to experts of Zipf popularity (rank 0\n"
         "                  receives the most); zipf:0 is even (default)\n"
         "  --compare mpi   also time Open MPI's collective on the same buffers (the job must be\n"
         "                  started by mpirun) and print vs_mpi: Strata's out-of-place busbw\n"
         "                  divided by Open MPI's, so above 1 means Strata is faster (for\n"
         "                  broadcast, Open MPI's root copies its input to its output first)\n"
         "  --device cuda   the buffers in CUDA device memory, one GPU per rank by LOCAL_RANK\n"
         "                  (ranks sharing a GPU take the staged path: docs/device.md)\n"
         "  --fresh         every rank rewrites its input (a store per cache line) before every\n"
         "                  call, timed with it, Open MPI's too; calls are blocking. Without\n"
         "                  it a path that reads peers' inputs in place (-R 2) finds them in\n"
         "                  its cache from the last call, as no step that makes new data would\n"
         "  -R 2            host buffers from Communicator::alloc_symmetric, which the ranks of\n"
         "                  a node read from each other unstaged (all_gather, all_to_all(v)); as\n"
         "                  nccl-tests' -R 2. Open MPI (--compare mpi) times the same memory\n"
         "  --compare nccl  with --device cuda: also time raw NCCL on the same buffers and print\n"
         "                  vs_nccl (NCCL's time / Strata's out-of-place time, above 1: Strata\n"
         "                  faster; N/A where ranks share a GPU, which NCCL refuses)\n"
         "  --json FILE     write every row as JSON\n"
         "  --plot FILE.svg busbw against size\n"
         "  -h, --help      print this and exit\n";
}

std::optional<Options> parse(int argc, char** argv, std::string& error) {
  Options o;
  if (argc < 2) {
    error = "missing collective";
    return std::nullopt;
  }
  bool found = false;
  for (auto& [name, v] : kColls) {
    if (std::strcmp(argv[1], name) == 0) o.coll = v, found = true;
  }
  if (!found) {
    error = std::string("unknown collective '") + argv[1] + "'";
    return std::nullopt;
  }
  for (int i = 2; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      o.help = true;
      return o;
    }
    if (flag == "--fresh") {  // the one flag without a value
      o.fresh = true;
      continue;
    }
    if (i + 1 >= argc) {
      error = flag + ": missing value";
      return std::nullopt;
    }
    std::string v = argv[++i];
    auto bad = [&](const char* what) {
      error = flag + ": '" + v + "' is not " + what;
      return std::nullopt;
    };
    int x = 0;
    if (flag == "-b" || flag == "-e" || flag == "-i") {
      auto s = parse_size(v);
      if (!s) return bad("a size (e.g. 8, 64K, 1M, 2G)");
      if (flag == "-i" && *s == 0) return bad("a step above 0 bytes");
      (flag == "-b" ? o.min_bytes : flag == "-e" ? o.max_bytes : o.step_bytes) = *s;
      if (flag == "-i") o.factor = 0;
    } else if (flag == "-f") {
      char* end = nullptr;
      o.factor = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !std::isfinite(o.factor) || o.factor <= 1)
        return bad("a finite factor > 1");
      o.step_bytes = 0;
    } else if (flag == "-n" || flag == "-w" || flag == "-r" || flag == "-c" || flag == "-z") {
      if (!parse_int(v, x)) return bad("a non-negative integer");
      if (flag == "-n" && x == 0) return bad("a number of iterations above 0");
      if ((flag == "-c" || flag == "-z") && x > 1) return bad("0 or 1");
      if (flag == "-n") o.iters = x;
      if (flag == "-w") o.warmup = x;
      if (flag == "-r") o.root = x;
      if (flag == "-c") o.check = x != 0;
      if (flag == "-z") o.blocking = x != 0;
    } else if (flag == "-d") {
      o.dtypes.clear();
      for (auto t : kTypes) {
        if (v == "all" || v == strata::dtype_name(t)) o.dtypes.push_back(t);
      }
      if (o.dtypes.empty()) return bad("a dtype (f32 f64 f16 bf16 i8 u8 i32 i64 all)");
    } else if (flag == "-o") {
      o.ops.clear();
      for (auto op : kOps) {
        if (v == "all" || v == strata::op_name(op)) o.ops.push_back(op);
      }
      if (o.ops.empty()) return bad("an op (sum prod min max avg all)");
    } else if (flag == "--compare") {
      if (v != "mpi" && v != "nccl") return bad("a peer to compare with (mpi, nccl)");
      (v == "mpi" ? o.compare_mpi : o.compare_nccl) = true;
    } else if (flag == "-R") {
      if (v != "0" && v != "2") return bad("0 (plain buffers) or 2 (symmetric buffers)");
      o.symmetric = v == "2";
    } else if (flag == "--device") {
      if (v != "cuda" && v != "host") return bad("a memory to run on (host, cuda)");
      o.device = v == "cuda";
    } else if (flag == "--skew") {
      const auto s = parse_zipf(v);
      if (!s) return bad("zipf:S (S >= 0)");
      o.skew = *s;
    } else if (flag == "--json") {
      o.json = v;
    } else if (flag == "--plot") {
      o.plot = v;
    } else {
      error = "unknown flag '" + flag + "'";
      return std::nullopt;
    }
  }
  if (o.min_bytes > o.max_bytes) {
    error = "-b is larger than -e";
    return std::nullopt;
  }
  if (o.compare_nccl && !o.device) {
    error = "--compare nccl needs --device cuda";
    return std::nullopt;
  }
  if (o.symmetric && o.device) {
    error = "-R 2 makes host buffers: not with --device cuda";
    return std::nullopt;
  }
  if (o.compare_mpi && o.device) {
    error = "--compare mpi times host memory: not with --device cuda";
    return std::nullopt;
  }
  if (o.skew > 0 && o.coll != Coll::all_to_allv) {
    error = "--skew applies to all_to_allv only";
    return std::nullopt;
  }
  // -o and -r are taken by every collective and used where they mean something, as nccl-tests
  // does: one command line sweeps every collective (perf_check_* in tests/CMakeLists.txt).
  if (!has_op(o.coll)) o.ops = {strata::ReduceOp::sum};  // one pass, redop column "none"
  return o;
}

}  // namespace perf
