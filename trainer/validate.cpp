// strata-gpt validate: the same steps from the same initialisation under every layout the world
// size allows, each compared with the one-rank reference this mode computes itself. A cluster
// whose links, collectives and sharding are right reproduces the reference losses; one that is
// wrong anywhere (a bad link, a broken algorithm, a sharding bug) does not.
#include <cmath>
#include <cstdio>
#include <cstring>

#include "modes.hpp"
#include "strata/topology.hpp"

namespace gpt {

namespace {

struct LayoutRun {
  std::string name;
  int stage = 0;
  std::vector<float> losses;
  double step_s = 0, comm_s = 0, exposed_s = 0, bus_bytes = 0;
  bool identical = true;  // parameters bit-identical on every rank at the end
};

uint64_t fnv1a(const std::vector<float>& v) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

LayoutRun run_layout(strata::Communicator& comm, const CharCorpus& data, TrainOptions o,
                     const std::string& name) {
  LayoutRun run{name, o.stage, {}, 0, 0, 0, 0, true};
  Trainer t(comm, data, o);
  for (int s = 0; s < o.steps; ++s) {
    const StepReport r = t.step();
    run.losses.push_back(r.loss);
    if (s == 0 && o.steps > 1) continue;  // the first step sets up buffers and sub-groups
    run.step_s += r.seconds, run.comm_s += r.comm_seconds, run.exposed_s += r.exposed_seconds;
    run.bus_bytes += r.bus_bytes;
  }
  const int timed = std::max(1, o.steps - 1);
  run.step_s /= timed;
  std::vector<int64_t> mine{int64_t(fnv1a(t.parameters()))}, all(size_t(comm.size()));
  comm.all_gather(strata::buffer(mine), strata::buffer(all)).wait();
  for (int64_t h : all) run.identical = run.identical && h == all[0];
  return run;
}

double max_relative_diff(const std::vector<float>& a, const std::vector<float>& ref) {
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    worst = std::max(worst, std::fabs(double(a[i]) - ref[i]) / std::max(1e-12, std::fabs(double(ref[i]))));
  return worst;
}

}  // namespace

int run_validate(strata::Communicator& world, const CharCorpus& data, const RunOptions& r) {
  const bool lead = world.rank() == 0;
  const int n = world.size();
  TrainOptions o = r.train;
  // The reference: rank 0 alone, the whole global batch, the same micro-batch count per rank
  // times n so that its micro-batches are the layouts' per-rank slices.
  LayoutRun ref;
  strata::Communicator one = world.split(lead ? 0 : -1, 0);
  if (lead) {
    TrainOptions ro = o;
    ro.stage = 0;
    ro.micro_batches = o.micro_batches * n;
    std::printf("# strata-gpt validate: %zu parameters, %d ranks, %d steps, global batch %d; "
                "computing the 1-rank reference...\n",
                o.model.num_params(), n, o.steps, o.global_batch);
    std::fflush(stdout);
    ref = run_layout(one, data, ro, "reference");
  }
  world.barrier().wait();

  const strata::JobTopology job = strata::JobTopology::gather(world);
  strata::Link weakest;
  bool have_link = false;
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) {
      const strata::Link l = job.link(a, b);
      if (!have_link || l.bandwidth_gbs < weakest.bandwidth_gbs) weakest = l, have_link = true;
    }

  const std::pair<const char*, int> layouts[] = {{"dp", 0}, {"zero1", 1}, {"zero2", 2}, {"zero3", 3}};
  if (lead) {
    std::printf("# tolerance: max |loss - reference| / reference <= %.1e over every step\n",
                r.tolerance);
    std::printf("%-10s %5s %13s %6s %9s %6s %9s %11s  %s\n", "# layout", "ranks", "max_rel_diff",
                "result", "step_ms", "comm%", "exposed%", "busbw_GB/s", "link (weakest pair)");
    std::printf("%-10s %5d %13s %6s %9.1f %6s %9s %11s  %s\n", "reference", 1, "-", "-",
                1e3 * ref.step_s, "-", "-", "-", "-");
  }
  bool ok = true;
  for (auto [name, stage] : layouts) {
    TrainOptions lo = o;
    lo.stage = stage;
    const LayoutRun run = run_layout(world, data, lo, name);
    if (!lead) continue;
    const double diff = max_relative_diff(run.losses, ref.losses);
    const bool pass = diff <= r.tolerance && run.identical;
    ok = ok && pass;
    char link[64] = "-", busbw[32] = "-";
    if (have_link)
      std::snprintf(link, sizeof link, "%s, ~%.1f GB/s",
                    std::string(strata::path_class_name(weakest.cls)).c_str(),
                    weakest.bandwidth_gbs);
    if (run.comm_s > 0) std::snprintf(busbw, sizeof busbw, "%.2f", run.bus_bytes / run.comm_s / 1e9);
    const double total = run.step_s * std::max(1, o.steps - 1);
    std::printf("%-10s %5d %13.2e %6s %9.1f %6.0f %9.0f %11s  %s%s\n", name, n, diff,
                pass ? "pass" : "FAIL", 1e3 * run.step_s, 100 * run.comm_s / total,
                100 * run.exposed_s / total, busbw, link,
                run.identical ? "" : "  (parameters differ across ranks)");
    std::fflush(stdout);
  }
  std::vector<int> verdict{ok ? 1 : 0};
  world.broadcast(strata::buffer(verdict), 0).wait();
  if (lead) std::printf("# validate: %s\n", verdict[0] ? "every layout matches the reference" : "FAILED");
  return verdict[0] ? 0 : 1;
}

}  // namespace gpt
