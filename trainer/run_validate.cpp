// strata-gpt validate: the same steps from the same initialisation under every layout the world
// size allows, each compared with the one-rank reference this mode computes itself. A cluster
// whose links, collectives, sharding and parallel layouts are right reproduces the reference
// losses; one that is wrong anywhere (a bad link, a broken algorithm, a sharding or slicing bug)
// does not. Each layout's traffic and memory are checked against their formulas
// (layout_formulas.hpp) and each of its groups' bandwidth against the topology's promise
// (link_probe.hpp); --report writes it all down (report.hpp).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "modes.hpp"
#include "strata/topology.hpp"
#include "validate/layout_formulas.hpp"
#include "validate/layouts.hpp"
#include "validate/link_probe.hpp"
#include "validate/provenance.hpp"
#include "validate/report.hpp"
#include "validate/rounding.hpp"

#ifndef STRATA_VERSION
#define STRATA_VERSION "unknown"
#endif
#ifndef STRATA_GIT_COMMIT
#define STRATA_GIT_COMMIT "unknown"
#endif

namespace gpt {

namespace {

// What one rank measured of a layout, in the order gathered to rank 0.
enum Field {
  kPass,
  kCompute,
  kTp,
  kPp,
  kDp,
  kEpRows,
  kEpAverage,
  kCp,
  kParam,
  kGrad,
  kOpt,
  kAct,
  kFormulas,
  kFields
};

struct LayoutRun {
  std::vector<float> losses;
  // Before clipping, per step: AdamW all but cancels a gradient's scale, so a layout that
  // reduced its gradients wrong by a factor (a sum for a mean, a tensor counted twice in the
  // norm) would still reproduce the losses; its gradient norm does not.
  std::vector<float> grad_norms;
  double step_s = 0;
  bool identical = true;                // every replica bit-identical at the end
  std::vector<double> fields;           // this rank's, kFields of them
  std::vector<ReportBandwidth> probes;  // rank 0 only
};

// Whether this rank's traffic and memory equal the formulas.
bool matches_formulas(const TrainOptions& o, const StepReport& last,
                      const strata::MemoryReport& mem, int ranks, int stage) {
  const Traffic f = traffic_formula(o, ranks, stage);
  const Memory m = memory_formula(o, ranks, stage);
  auto close = [](double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(1.0, b); };
  return close(last.tp_bus_bytes, f.tp_bus_bytes) && close(last.pp_bytes, f.pp_bytes) &&
         close(last.ep_bus_bytes, f.ep_bus_bytes) && close(last.cp_bytes, f.cp_bytes) &&
         std::all_of(last.experts.begin(), last.experts.end(),
                     [&](const auto& x) { return close(x.a2a_bytes, x.a2a_bytes_formula); }) &&
         close(last.bus_bytes, f.dp_bus_bytes) && mem.param_bytes == m.param_bytes &&
         mem.grad_bytes == m.grad_bytes && mem.optimizer_bytes == m.optimizer_bytes;
}

LayoutRun run_layout(strata::Communicator& comm, const CharCorpus& data, const TrainOptions& o,
                     double threshold, bool probe) {
  LayoutRun run;
  Trainer t(comm, data, o);
  StepReport last;
  double pass = 0, compute = 0;
  for (int s = 0; s < o.steps; ++s) {
    last = t.step();
    run.losses.push_back(last.loss);
    run.grad_norms.push_back(float(last.grad_norm));
    if (s == 0) continue;  // the first step sets up buffers and sub-groups
    run.step_s += last.seconds, pass += last.pass_seconds, compute += last.compute_seconds;
  }
  run.step_s /= o.steps - 1;
  run.identical = t.replicas_identical();
  const strata::MemoryReport mem = t.engine().memory();
  const int n = comm.size(), stage = comm.rank() / (n / o.pp);  // pp is the slowest dimension
  run.fields = {pass,
                compute,
                last.tp_bus_bytes,
                last.pp_bytes,
                last.bus_bytes,
                last.ep_bytes,
                last.ep_bus_bytes,
                last.cp_bytes,
                double(mem.param_bytes),
                double(mem.grad_bytes),
                double(mem.optimizer_bytes),
                double(t.activation_bytes()),
                matches_formulas(o, last, mem, n, stage) ? 1.0 : 0.0};
  if (probe) run.probes = probe_groups(t.mesh(), o, threshold);
  return run;
}

double max_relative_diff(const std::vector<float>& a, const std::vector<float>& ref) {
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    worst = std::max(worst,
                     std::fabs(double(a[i]) - ref[i]) / std::max(1e-12, std::fabs(double(ref[i]))));
  return worst;
}

// The report's view of a layout from every rank's fields (all[r * kFields + f]).
ReportLayout describe(const TrainOptions& o, int n, const LayoutRun& run,
                      const std::vector<double>& all, const LayoutRun& ref, double tol,
                      double grad_norm_tol) {
  ReportLayout l;
  l.name = layout_name(o, n);
  l.tp = o.tp, l.pp = o.pp, l.ep = o.ep, l.cp = o.cp, l.dp = n / (o.tp * o.cp * o.ep * o.pp);
  if (o.cp > 1) l.cp_comm = std::string(cp_comm_name(o.cp_comm));
  l.zero_stage = o.stage, l.sp = o.sp;
  l.virtual_stages = o.virtual_stages, l.micro_batches = o.micro_batches;
  if (o.pp > 1) l.schedule = std::string(pp::schedule_name(o.schedule));
  strata::MeshShape shape;
  shape.tp = o.tp, shape.cp = o.cp, shape.ep = o.ep, shape.pp = o.pp;
  shape = shape.resolved(n);
  for (strata::Dim d :
       {strata::Dim::tp, strata::Dim::cp, strata::Dim::ep, strata::Dim::pp, strata::Dim::dp}) {
    if ((d == strata::Dim::ep && o.ep == 1) || (d == strata::Dim::cp && o.cp == 1)) continue;
    ReportGroup g{std::string(strata::dim_name(d)), {}};
    for (int r = 0; r < n; ++r)
      if (const auto ranks = shape.group(r, {d}); ranks.front() == r) g.groups.push_back(ranks);
    l.groups.push_back(g);
  }
  l.losses = run.losses;
  l.max_rel_diff = max_relative_diff(run.losses, ref.losses);
  l.grad_norm_rel_diff = max_relative_diff(run.grad_norms, ref.grad_norms);
  l.bit_identical = run.losses == ref.losses;
  l.replicas_identical = run.identical;
  l.formulas_match = true;
  for (int r = 0; r < n; ++r) l.formulas_match &= all[size_t(r) * kFields + kFormulas] == 1.0;
  l.step_ms = 1e3 * run.step_s;
  // Bubble: the share of the pipeline's time (its longest stage's passes) a stage did not compute.
  double span = 0;
  for (int s = 0; s < o.pp; ++s)
    span = std::max(span, all[size_t(s) * size_t(n / o.pp) * kFields + kPass]);
  for (int s = 0; s < o.pp; ++s) {
    const double* f = all.data() + size_t(s) * size_t(n / o.pp) * kFields;  // tp 0, dp 0
    const Traffic tf = traffic_formula(o, n, s);
    const Memory mf = memory_formula(o, n, s);
    ReportStage st;
    st.stage = s;
    st.bubble = span > 0 ? 1 - f[kCompute] / span : 0;
    st.ideal_bubble =
        o.pp > 1 ? pp::ideal_bubble(o.schedule, o.pp, o.micro_batches, o.virtual_stages) : 0;
    st.tp_bytes = f[kTp], st.tp_bytes_formula = tf.tp_bus_bytes;
    st.pp_bytes = f[kPp], st.pp_bytes_formula = tf.pp_bytes, st.dp_bus_bytes = f[kDp];
    st.dp_bus_bytes_formula = tf.dp_bus_bytes;
    st.ep_bytes = f[kEpRows], st.ep_bus_bytes = f[kEpAverage];
    st.ep_bus_bytes_formula = tf.ep_bus_bytes;
    st.cp_bytes = f[kCp], st.cp_bytes_formula = tf.cp_bytes;
    st.param_bytes = size_t(f[kParam]), st.grad_bytes = size_t(f[kGrad]);
    st.optimizer_bytes = size_t(f[kOpt]), st.activation_bytes = size_t(f[kAct]);
    st.param_bytes_formula = mf.param_bytes, st.grad_bytes_formula = mf.grad_bytes;
    st.optimizer_bytes_formula = mf.optimizer_bytes;
    l.stages.push_back(st);
  }
  l.bandwidth = run.probes;
  bool probes = true;
  for (const auto& b : run.probes) probes &= b.pass;
  l.pass = l.max_rel_diff <= tol && l.grad_norm_rel_diff <= grad_norm_tol && l.replicas_identical &&
           l.formulas_match && probes;
  return l;
}

void print_row(const ReportLayout& l, int name_width) {
  double bubble = 0, tp = 0, pp = 0;
  for (const auto& s : l.stages)
    bubble = std::max(bubble, s.bubble), tp += s.tp_bytes, pp += s.pp_bytes;
  // links: the worst judged probe's share of its promise ("n/j": probes ran but sharing cores
  // made them unfit to judge).
  double worst = -1;
  for (const auto& b : l.bandwidth)
    if (b.judged && b.promise_gbs > 0)
      worst =
          worst < 0 ? b.busbw_gbs / b.promise_gbs : std::min(worst, b.busbw_gbs / b.promise_gbs);
  char links[32] = "-";
  if (worst >= 0)
    std::snprintf(links, sizeof links, "%.0f%%", 100 * worst);
  else if (!l.bandwidth.empty())
    std::snprintf(links, sizeof links, "n/j");
  std::printf("%-*s %13.2e %10.2e %6s %5s %8.1f %7.0f%% %10.3f %10.3f %9.0f %9.0f %6s%s\n",
              name_width, l.name.c_str(), l.max_rel_diff, l.grad_norm_rel_diff,
              l.pass ? "pass" : "FAIL", l.replicas_identical ? "yes" : "NO", l.step_ms,
              100 * bubble, tp / 1e6, pp / 1e6, l.stages[0].param_bytes / 1e3,
              l.stages[0].activation_bytes / 1e3, links,
              l.formulas_match ? "" : "  (traffic or memory differs from its formula)");
  std::fflush(stdout);
}

Report report_header(const RunOptions& r, int n, const strata::JobTopology& job) {
  Report rep;
  const Config& c = r.train.model;
  rep.title = "strata-gpt validate: " + std::to_string(n) + " ranks";
  rep.strata_version = STRATA_VERSION, rep.commit = STRATA_GIT_COMMIT;
  rep.compiler = std::string("GCC ") + __VERSION__;
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  rep.date_utc = date, rep.command_line = r.command_line, rep.seed = r.train.seed;
  rep.model = "L " + std::to_string(c.layers) + ", H " + std::to_string(c.heads) + ", C " +
              std::to_string(c.embd) + ", T " + std::to_string(c.ctx) + ", V " +
              std::to_string(c.vocab) + ", " + std::to_string(c.num_params()) + " parameters";
  rep.ranks = n, rep.steps = r.train.steps, rep.global_batch = r.train.global_batch;
  rep.tolerance = r.tolerance;
  // Each gradient element sums the global batch's tokens; the parameters it is taken at have
  // drifted by the same reordering over the steps before it.
  rep.grad_norm_tolerance =
      reorder_bound(double(r.train.global_batch) * c.ctx, double(r.train.steps));
  describe_inventory(job, rep);
  describe_software(rep);
  return rep;
}

}  // namespace

int run_validate(strata::Communicator& world, const CharCorpus& data, const RunOptions& r) {
  const bool lead = world.rank() == 0;
  const int n = world.size();
  const std::vector<TrainOptions> layouts = validate_layouts(r.layouts, r.train, n);
  int name_width = 26;  // the table's first column holds the longest layout name
  for (const TrainOptions& o : layouts)
    name_width = std::max(name_width, int(layout_name(o, n).size()));
  const auto start = std::chrono::steady_clock::now();
  const strata::JobTopology job = strata::JobTopology::gather(world);
  Report rep = report_header(r, n, job);
  measure_links(world, rep);
  // The reference: rank 0 alone, the whole global batch, in micro-batches of the layouts' size.
  LayoutRun ref;
  strata::Communicator one = world.split(lead ? 0 : -1, 0);
  if (lead) {
    TrainOptions ro = r.train;
    ro.stage = 0, ro.tp = ro.pp = ro.ep = ro.cp = 1, ro.sp = false, ro.virtual_stages = 1;
    ro.micro_batches = r.train.micro_batches * n;
    std::printf(
        "# strata-gpt validate: %zu parameters, %d ranks on %zu nodes, %zu layouts, %d "
        "steps, global batch %d; computing the 1-rank reference...\n",
        r.train.model.num_params(), n, job.nodes.size(), layouts.size(), ro.steps, ro.global_batch);
    std::fflush(stdout);
    ref = run_layout(one, data, ro, r.bw_threshold, false);
    rep.reference_losses = ref.losses, rep.reference_step_ms = 1e3 * ref.step_s;
    std::printf(
        "# pass: max |loss - reference| / reference <= %.1e over every step, of the gradient "
        "norm before clipping <= %.1e, replicas "
        "bit-identical, traffic and memory equal to their formulas on every rank, each "
        "group's bus bandwidth >= %.0f%% of its weakest link's promise (links: the worst)\n",
        r.tolerance, rep.grad_norm_tolerance, 100 * r.bw_threshold);
    std::printf("%-*s %13s %10s %6s %5s %8s %8s %10s %10s %9s %9s %6s\n", name_width, "# layout",
                "max_rel_diff", "gnorm_diff", "result", "repl", "step_ms", "bubble", "tp_MB/step",
                "pp_MB/step", "param_KB", "act_KB", "links");
    std::printf("%-*s %13s %10s %6s %5s %8.1f %8s %10s %10s %9.0f %9.0f %6s\n", name_width,
                "reference", "-", "-", "-", "-", 1e3 * ref.step_s, "-", "-", "-",
                ref.fields[kParam] / 1e3, ref.fields[kAct] / 1e3, "-");
  }
  world.barrier().wait();
  for (const TrainOptions& o : layouts) {
    const LayoutRun run = run_layout(world, data, o, r.bw_threshold, true);
    std::vector<double> all(size_t(n) * kFields);
    world.all_gather(strata::buffer(run.fields), strata::buffer(all)).wait();
    if (!lead) continue;
    rep.layouts.push_back(describe(o, n, run, all, ref, r.tolerance, rep.grad_norm_tolerance));
    print_row(rep.layouts.back(), name_width);
  }
  bool ok = true;
  for (const auto& l : rep.layouts) ok &= l.pass;
  rep.pass = ok;
  std::vector<int> verdict{ok ? 1 : 0};
  world.broadcast(strata::buffer(verdict), 0).wait();
  rep.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (lead && !r.report.empty()) {
    write_report(r.report, rep);
    std::printf("# report: %s/README.md\n", r.report.c_str());
  }
  if (lead) {
    std::printf("# validate: %s\n", verdict[0] ? "every layout matches the reference" : "FAILED");
    std::fflush(stdout);
  }
  // A failing rank's exit makes a launcher stop the rest: wait for the verdict and the report.
  world.barrier().wait();
  return verdict[0] ? 0 : 1;
}

}  // namespace gpt
