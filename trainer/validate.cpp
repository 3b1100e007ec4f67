// strata-gpt validate: the same steps from the same initialisation under every layout the world
// size allows, each compared with the one-rank reference this mode computes itself. A cluster
// whose links, collectives, sharding and parallel layouts are right reproduces the reference
// losses; one that is wrong anywhere (a bad link, a broken algorithm, a sharding or slicing bug)
// does not. Besides the losses each layout's traffic and memory are checked against their
// formulas (layout_formulas.hpp).
#include <cmath>
#include <cstdio>

#include "layout_formulas.hpp"
#include "layouts.hpp"
#include "modes.hpp"
#include "strata/topology.hpp"

namespace gpt {

namespace {

struct LayoutRun {
  std::string name;
  TrainOptions o;
  std::vector<float> losses;
  double step_s = 0, comm_s = 0, bus_bytes = 0, bubble = 0;
  StepReport last;           // the last step's instruments
  bool identical = true;     // every replica bit-identical at the end
  strata::MemoryReport memory;
  size_t activation_bytes = 0;
};

LayoutRun run_layout(strata::Communicator& comm, const CharCorpus& data, const TrainOptions& o,
                     const std::string& name) {
  LayoutRun run;
  run.name = name, run.o = o;
  Trainer t(comm, data, o);
  double pass = 0, compute = 0;
  for (int s = 0; s < o.steps; ++s) {
    const StepReport r = t.step();
    run.losses.push_back(r.loss);
    run.last = r;
    if (s == 0 && o.steps > 1) continue;  // the first step sets up buffers and sub-groups
    run.step_s += r.seconds, run.comm_s += r.comm_seconds, run.bus_bytes += r.bus_bytes;
    pass += r.pass_seconds, compute += r.compute_seconds;
  }
  run.step_s /= std::max(1, o.steps - 1);
  run.bubble = pass > 0 ? 1 - compute / pass : 0;
  run.identical = t.replicas_identical();
  run.memory = t.engine().memory();
  run.activation_bytes = t.activation_bytes();
  return run;
}

double max_relative_diff(const std::vector<float>& a, const std::vector<float>& ref) {
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    worst = std::max(worst, std::fabs(double(a[i]) - ref[i]) /
                                std::max(1e-12, std::fabs(double(ref[i]))));
  return worst;
}

bool close(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(b)); }

// Whether this rank's traffic and memory equal the formulas (every rank checks its own).
bool matches_formulas(const LayoutRun& run, int ranks, int stage) {
  const Traffic f = traffic_formula(run.o, ranks, stage);
  const Memory m = memory_formula(run.o, ranks, stage);
  return close(run.last.tp_bus_bytes, f.tp_bus_bytes) && close(run.last.pp_bytes, f.pp_bytes) &&
         run.memory.param_bytes == m.param_bytes && run.memory.grad_bytes == m.grad_bytes &&
         run.memory.optimizer_bytes == m.optimizer_bytes;
}

}  // namespace

int run_validate(strata::Communicator& world, const CharCorpus& data, const RunOptions& r) {
  const bool lead = world.rank() == 0;
  const int n = world.size();
  const std::vector<TrainOptions> layouts = validate_layouts(r, n);
  // The reference: rank 0 alone, the whole global batch, in micro-batches of the layouts' size.
  LayoutRun ref;
  strata::Communicator one = world.split(lead ? 0 : -1, 0);
  if (lead) {
    TrainOptions ro = r.train;
    ro.stage = 0, ro.tp = ro.pp = 1, ro.sp = false, ro.virtual_stages = 1;
    ro.micro_batches = r.train.micro_batches * n;
    std::printf("# strata-gpt validate: %zu parameters, %d ranks, %zu layouts, %d steps, global "
                "batch %d; computing the 1-rank reference...\n",
                r.train.model.num_params(), n, layouts.size(), ro.steps, ro.global_batch);
    std::fflush(stdout);
    ref = run_layout(one, data, ro, "reference");
  }
  world.barrier().wait();

  if (lead) {
    std::printf("# pass: max |loss - reference| / reference <= %.1e over every step, replicas "
                "bit-identical, traffic and memory equal to their formulas on every rank\n",
                r.tolerance);
    std::printf("%-26s %13s %6s %5s %8s %7s %10s %10s %9s %9s\n", "# layout", "max_rel_diff",
                "result", "repl", "step_ms", "bubble", "tp_MB/step", "pp_MB/step", "param_KB",
                "act_KB");
    std::printf("%-26s %13s %6s %5s %8.1f %7s %10s %10s %9.0f %9.0f\n", "reference", "-", "-", "-",
                1e3 * ref.step_s, "-", "-", "-", ref.memory.param_bytes / 1e3,
                ref.activation_bytes / 1e3);
  }
  bool ok = true;
  for (const TrainOptions& o : layouts) {
    const std::string name = layout_name(o, n);
    const LayoutRun run = run_layout(world, data, o, name);
    const int stage = world.rank() / (n / o.pp);  // pp is the slowest mesh dimension
    std::vector<int> formulas{matches_formulas(run, n, stage) ? 1 : 0};
    world.all_reduce(strata::buffer(formulas), strata::ReduceOp::min).wait();
    if (!lead) continue;
    const double diff = max_relative_diff(run.losses, ref.losses);
    const bool pass = diff <= r.tolerance && run.identical && formulas[0];
    ok = ok && pass;
    std::printf("%-26s %13.2e %6s %5s %8.1f %6.0f%% %10.3f %10.3f %9.0f %9.0f%s\n", name.c_str(),
                diff, pass ? "pass" : "FAIL", run.identical ? "yes" : "NO", 1e3 * run.step_s,
                100 * run.bubble, run.last.tp_bus_bytes / 1e6, run.last.pp_bytes / 1e6,
                run.memory.param_bytes / 1e3, run.activation_bytes / 1e3,
                formulas[0] ? "" : "  (traffic or memory differs from its formula)");
    std::fflush(stdout);
  }
  std::vector<int> verdict{ok ? 1 : 0};
  world.broadcast(strata::buffer(verdict), 0).wait();
  if (lead)
    std::printf("# validate: %s\n", verdict[0] ? "every layout matches the reference" : "FAILED");
  return verdict[0] ? 0 : 1;
}

}  // namespace gpt
