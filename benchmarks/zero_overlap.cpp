// strata-zero-bench: how much of ZeRO's communication the trainer waits for. Trains the sharding
// tests' MLP (tests/sharding/model.hpp), scaled up, under stages 0-3 and prints, per stage, the
// communication time of a step, the part that was exposed (the trainer blocked on it), the step
// time and the memory per rank. Run under mpirun or strata-run.
//
//   strata-zero-bench [--layers 8] [--width 512] [--batch 64] [--steps 5] [--prefetch 1]
//                     [--bucket-kb 1024]
// The bucket cap defaults to about one layer: DDP's 25 MB default would put this whole model in
// one bucket, which no trainer would choose for a model this size.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../tests/sharding/model.hpp"
#include "strata/strata.hpp"

namespace {

struct Args {
  size_t layers = 8, width = 512, batch = 64;
  int steps = 5, prefetch = 1;
  size_t bucket_kb = 1024;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const long v = std::strtol(argv[i + 1], nullptr, 10);
    if (v <= 0 && k != "--prefetch") {
      std::fprintf(stderr, "strata-zero-bench: %s needs a positive number\n", k.c_str());
      std::exit(2);
    }
    if (k == "--layers")
      a.layers = size_t(v);
    else if (k == "--width")
      a.width = size_t(v);
    else if (k == "--batch")
      a.batch = size_t(v);
    else if (k == "--steps")
      a.steps = int(v);
    else if (k == "--prefetch")
      a.prefetch = int(v);
    else if (k == "--bucket-kb")
      a.bucket_kb = size_t(v);
    else {
      std::fprintf(stderr, "strata-zero-bench: unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  strata::Communicator world = strata::Communicator::from_env();
  const int n = world.size(), rank = world.rank();
  shtest::Mlp m;
  m.dims.assign(a.layers + 1, a.width);
  const size_t batch = (a.batch + size_t(n) - 1) / size_t(n) * size_t(n);
  if (rank == 0) {
    std::printf(
        "# strata-zero-bench: %zu layers of %zu x %zu, global batch %zu, %d ranks, %d "
        "timed steps, prefetch %d, bucket cap %zu KiB\n",
        a.layers, a.width, a.width, batch, n, a.steps, a.prefetch, a.bucket_kb);
    std::printf(
        "# stage  comm_ms  exposed_ms  exposed_%%  step_ms  params_MB  grads_MB  optim_MB  "
        "peak_gathered_MB\n");
  }
  for (int stage = 0; stage <= 3; ++stage) {
    strata::ZeroOptions o;
    o.stage = stage;
    o.prefetch_depth = a.prefetch;
    o.buckets.cap_bytes = a.bucket_kb << 10;
    o.buckets.first_cap_bytes = std::min(o.buckets.first_cap_bytes, o.buckets.cap_bytes);
    strata::ZeroEngine e(world, m.specs(), o);
    shtest::init_engine(m, e);
    shtest::train_step(m, e, 0, rank, n, batch);  // warm-up: buffers, sub-groups
    double comm = 0, exposed = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int s = 1; s <= a.steps; ++s) {
      shtest::train_step(m, e, s, rank, n, batch);
      comm += e.last_step_stats().comm_seconds;
      exposed += e.last_step_stats().exposed_seconds;
    }
    const double step_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / a.steps;
    const strata::MemoryReport mem = e.memory();
    if (rank == 0) {
      std::printf("%7d  %7.2f  %10.2f  %9.1f  %7.2f  %9.2f  %8.2f  %8.2f  %16.2f\n", stage,
                  1e3 * comm / a.steps, 1e3 * exposed / a.steps,
                  comm > 0 ? 100 * exposed / comm : 0.0, 1e3 * step_s, mem.param_bytes / 1e6,
                  mem.grad_bytes / 1e6, mem.optimizer_bytes / 1e6, mem.peak_gathered_bytes / 1e6);
    }
  }
  return 0;
}
