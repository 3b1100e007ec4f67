#include "perf_moe_options.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>

#include "perf_options.hpp"

namespace perf {
namespace {

bool parse_int(const std::string& s, int lo, int hi, int& out) {
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end || v < lo || v > hi) return false;
  out = int(v);
  return true;
}

}  // namespace

std::string moe_usage() {
  return "usage: strata-perf moe [flags]      (one process per rank: mpirun, strata-run, srun)\n"
         "\n"
         "Times one mixture-of-experts layer's communication: every rank routes its T tokens to\n"
         "k of E experts (E / ranks on each rank), exchanges the per-expert token counts\n"
         "(all_to_all), dispatches the token rows (all_to_allv), and sends them back (combine,\n"
         "all_to_allv; the experts' compute is left out). Prints microseconds per dispatch and\n"
         "per combine (max over ranks) and GB/s as DeepEP counts it: the T k H bytes a rank\n"
         "dispatches, over the time. Every received row is checked.\n"
         "\n"
         "  --tokens T      tokens per rank (default 4096)\n"
         "  --hidden H      elements per token (default 2048)\n"
         "  --top-k K       experts per token (default 2)\n"
         "  --experts E     experts over all ranks, a multiple of the ranks (default 8)\n"
         "  --skew zipf:S   experts' popularity: the i-th of a fixed shuffle draws (i + 1)^-S\n"
         "                  (default zipf:0, uniform)\n"
         "  -d TYPE         element type: bf16 f16 f32 (default bf16)\n"
         "  -n N            timed iterations (default 20)\n"
         "  -w N            untimed warm-up iterations (default 5)\n"
         "  -c 0|1          check every received row (default 1)\n"
         "  --compare mpi   also time Open MPI (MPI_Alltoall, MPI_Alltoallv) on the same buffers\n"
         "                  (the job must be started by mpirun); vs_mpi = its time / Strata's\n"
         "  -h, --help      print this and exit\n";
}

std::optional<MoeOptions> parse_moe(int argc, char** argv, std::string& error) {
  MoeOptions o;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      o.help = true;
      return o;
    }
    if (i + 1 >= argc) {
      error = flag + ": missing value";
      return std::nullopt;
    }
    const std::string v = argv[++i];
    auto bad = [&](const char* what) {
      error = flag + ": '" + v + "' is not " + what;
      return std::nullopt;
    };
    int x = 0;
    if (flag == "--tokens" || flag == "--hidden" || flag == "--experts") {
      if (!parse_int(v, 1, 1 << 24, x)) return bad("a positive integer");
      (flag == "--tokens" ? o.tokens : flag == "--hidden" ? o.hidden : o.experts) = x;
    } else if (flag == "--top-k") {
      if (!parse_int(v, 1, 1 << 16, x)) return bad("a positive integer");
      o.top_k = x;
    } else if (flag == "-n" || flag == "-w" || flag == "-c") {
      if (!parse_int(v, 0, 1000000000, x)) return bad("a non-negative integer");
      if (flag == "-n" && x == 0) return bad("a number of iterations above 0");
      if (flag == "-c" && x > 1) return bad("0 or 1");
      if (flag == "-n") o.iters = x;
      if (flag == "-w") o.warmup = x;
      if (flag == "-c") o.check = x != 0;
    } else if (flag == "--skew") {
      const auto s = parse_zipf(v);
      if (!s) return bad("zipf:S (S >= 0)");
      o.skew = *s;
    } else if (flag == "-d") {
      if (v == "bf16")
        o.dtype = strata::DataType::bf16;
      else if (v == "f16")
        o.dtype = strata::DataType::f16;
      else if (v == "f32")
        o.dtype = strata::DataType::f32;
      else
        return bad("a dtype (bf16 f16 f32)");
    } else if (flag == "--compare") {
      if (v != "mpi") return bad("a peer to compare with (mpi)");
      o.compare_mpi = true;
    } else {
      error = "unknown flag '" + flag + "'";
      return std::nullopt;
    }
  }
  if (o.top_k > o.experts) {
    error = "--top-k " + std::to_string(o.top_k) + " exceeds --experts " +
            std::to_string(o.experts) + " (a token goes to k distinct experts)";
    return std::nullopt;
  }
  return o;
}

std::vector<int> route(const MoeOptions& o, int rank) {
  std::vector<int> order(size_t(o.experts));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 shuffle(0x5eed);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[shuffle() % i]);
  std::vector<double> weight(order.size());
  for (size_t i = 0; i < order.size(); ++i) weight[size_t(order[i])] = std::pow(i + 1.0, -o.skew);
  std::mt19937_64 rng(0x9e3779b97f4a7c15ull * uint64_t(rank + 1));
  std::vector<int> to;
  to.reserve(size_t(o.tokens) * size_t(o.top_k));
  for (int t = 0; t < o.tokens; ++t) {
    std::vector<double> w = weight;  // without replacement: a chosen expert's weight drops to 0
    for (int c = 0; c < o.top_k; ++c) {
      const double total = std::accumulate(w.begin(), w.end(), 0.0);
      double u = double(rng() >> 11) * 0x1.0p-53 * total;
      size_t e = 0;
      while (e + 1 < w.size() && (u >= w[e] || w[e] == 0)) u -= w[e++];
      while (w[e] == 0) e = (e + 1) % w.size();  // rounding at the end: the next one left
      to.push_back(int(e));
      w[e] = 0;
    }
  }
  return to;
}

}  // namespace perf
