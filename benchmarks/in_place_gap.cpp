// strata-in-place-gap: how much longer an out-of-place call takes than the same call in place,
// the two alternating in one job (a barrier before each), so that both see the same host: on a
// shared VM, timing them in separate loops (strata-perf's columns) moved the ratio 1.3-3.7x
// between runs (benchmarks/RESULTS.md, "The out-of-place all-reduce's result stores").
//
//   strata-run -n 2 build/bin/strata-in-place-gap [all_reduce|all_gather] [-b 256K] [-e 64M]
//              [-f 4] [-n 100]
//
// Prints, per size (bytes of the output, as strata-perf), the median and first quartile of each
// kind over n pairs (the first 5 untimed) and out/in of the medians. The first pair's results are
// checked element by element: a wrong result exits 1.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "perf_options.hpp"
#include "strata/strata.hpp"

using namespace strata;

namespace {

struct Options {
  std::string coll = "all_reduce";
  size_t min_bytes = 256 << 10, max_bytes = 64 << 20, factor = 4;
  int pairs = 100;
};

// strata-perf's size syntax (8, 64K, 1.5M), at least `lo`; anything else ends the program.
size_t size_flag(const std::string& flag, const char* v, size_t lo) {
  const std::optional<size_t> s = perf::parse_size(v);
  if (!s || *s < lo) {
    std::fprintf(stderr, "strata-in-place-gap: %s '%s': expected a whole number of at least %zu\n",
                 flag.c_str(), v, lo);
    std::exit(2);
  }
  return *s;
}

double at(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[size_t(double(v.size() - 1) * q)];
}

// One call of `o.coll`: in place, on `io` alone (the all-gather's input is this rank's block of
// it), or out of place, from `in` to `out`.
void call(Communicator& c, const Options& o, bool in_place, std::vector<float>& io,
          std::vector<float>& in, std::vector<float>& out) {
  if (o.coll == "all_reduce") {
    (in_place ? c.all_reduce(buffer(io), ReduceOp::sum)
              : c.all_reduce(buffer(in), buffer(out), ReduceOp::sum))
        .wait();
  } else if (in_place) {
    const size_t block = io.size() / size_t(c.size());
    c.all_gather(Buffer{io.data() + block * size_t(c.rank()), block}, buffer(io)).wait();
  } else {
    c.all_gather(buffer(in), buffer(out)).wait();
  }
}

// Rank r's input holds r + 1 + i % 7 at i: the all-reduce's sum and the all-gather's blocks are
// exact in f32. Checked after the first pair only: the in-place all-reduce goes on summing.
bool right(const Communicator& c, const Options& o, const std::vector<float>& out) {
  const size_t n = size_t(c.size()), block = out.size() / n;
  for (size_t i = 0; i < out.size(); ++i) {
    const float want = o.coll == "all_reduce" ? float(n * (n + 1) / 2 + n * (i % 7))
                                              : float(i / block + 1 + (i % block) % 7);
    if (out[i] != want) {
      std::fprintf(stderr, "rank %d: %s element %zu is %g, not %g\n", c.rank(), o.coll.c_str(), i,
                   double(out[i]), double(want));
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "all_reduce" || a == "all_gather") && i == 1)
      o.coll = a;
    else if (a == "-b" && i + 1 < argc)
      o.min_bytes = size_flag(a, argv[++i], 1);
    else if (a == "-e" && i + 1 < argc)
      o.max_bytes = size_flag(a, argv[++i], 1);
    else if (a == "-f" && i + 1 < argc)
      o.factor = size_flag(a, argv[++i], 2);
    else if (a == "-n" && i + 1 < argc)
      o.pairs = int(std::min<size_t>(size_flag(a, argv[++i], 6), 1 << 20));
    else {
      std::fprintf(stderr, "strata-in-place-gap: unknown argument '%s' (see the file's header)\n",
                   a.c_str());
      return 2;
    }
  }
  Communicator c = Communicator::from_env();
  const size_t n = size_t(c.size());
  if (c.rank() == 0)
    std::printf("# %s, %d ranks, %d pairs\n# %12s %10s %10s %10s %10s %8s\n", o.coll.c_str(),
                c.size(), o.pairs, "bytes", "in us", "in q25", "out us", "out q25", "out/in");
  for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.factor) {
    const size_t count = std::max<size_t>(bytes / 4 / n, 1) * n;  // of the output, f32
    // Separate buffers for the two kinds, as a program's would be: one call's output is not
    // the next one's cached input.
    std::vector<float> in(o.coll == "all_reduce" ? count : count / n), out(count), io(count);
    for (size_t i = 0; i < in.size(); ++i) in[i] = float(c.rank() + 1 + i % 7);
    const size_t at_mine = o.coll == "all_reduce" ? 0 : in.size() * size_t(c.rank());
    std::copy(in.begin(), in.end(), io.begin() + ptrdiff_t(at_mine));
    std::vector<double> took[2];
    for (int p = 0; p < o.pairs; ++p) {
      for (bool in_place : {true, false}) {
        c.barrier().wait();
        const auto t0 = std::chrono::steady_clock::now();
        call(c, o, in_place, io, in, out);
        const std::chrono::duration<double, std::micro> us = std::chrono::steady_clock::now() - t0;
        if (p == 0 && !right(c, o, in_place ? io : out)) return 1;
        if (p >= 5) took[in_place].push_back(us.count());
      }
    }
    if (c.rank() == 0) {
      const double in_us = at(took[1], 0.5), out_us = at(took[0], 0.5);
      std::printf("  %12zu %10.1f %10.1f %10.1f %10.1f %8.2f\n", count * 4, in_us,
                  at(took[1], 0.25), out_us, at(took[0], 0.25), out_us / in_us);
    }
  }
  return 0;
}
