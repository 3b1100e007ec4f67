// strata-plan: which layout for this model on this cluster (docs/planner.md). Exit 0 when some
// layout fits, 1 when none does (saying what is short by how much), 2 on bad input.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

#include "check.hpp"
#include "plan.hpp"
#include "report.hpp"

namespace {

const char* kUsage = R"(usage: strata-plan [options]

model (default: --model small):
  --model NAME        tiny, small (the trainer's), gpt2, 7b, 70b, 175b, moe (8 experts, top-2)
  --layers L  --hidden C  --heads H  --seq T  --vocab V  --experts E  --top-k K
                      override the preset's sizes
cluster (default: --cluster live):
  --cluster C         NxG (N nodes of G devices, e.g. 128x8), live (this machine), a
                      topology file (hwloc XML, NCCL XML, strata-topo dump) times --nodes,
                      or a strata-perf --json file (its ranks and nodes, its link fitted)
  --device D          h100, a100 or cpu for NxG (default h100)
  --nodes N           nodes of a topology file or of live (default 1)
  --gpu-memory GB     memory per device (default: the device's)
  --flops TF          sustained TFLOP/s per device (default: the device's peak x 0.5, or
                      measured on live and cpu)
  --intra-gbs X  --inter-gbs X  --inter-latency-us X
                      the links within and between nodes (default: the device's)
training:
  --batch B           global batch in sequences (default 32)
  --precision P       fp32 (the trainer's) or bf16-mixed (default fp32)
  --layout L          evaluate this layout only, in validate's spelling plus mN (micro-batches),
                      e.g. tp8.sp.pp16.dp8.zero1.m64.recompute
output:
  --top N             layouts shown (default 10)
  --json FILE         every candidate with every term ('-': standard output)
checking (models strata-gpt trains: vocabulary 65):
  --check N           run N layouts with strata-gpt (the top-ranked, the best with each of
                      tp, pp, cp, ep, the best of further mesh shapes) and the predicted
                      slowest, and print predicted against measured, term by term
  --calibrate FILE    with --check: refit the compute rate, the waits and the network from
                      the runs, write them to FILE, and print the runs against the refitted
                      prediction
  --calibration FILE  plan with a calibration's figures
  --launcher CMD      how to start a run; {ranks} is the world size (default: strata-run -n
                      {ranks}; for emulated nodes: tools/strata-cluster --nodes N ... --)
  --steps S           steps per run (default 6; the median after the first counts)
  --rounds R          runs per layout, the layouts in turn in each round; the middle
                      round counts and the table shows the range (default 1)
  --workdir DIR       the runs' JSON and logs (default strata-plan-check)
                      (--calibrate, --launcher, --steps, --rounds, --workdir: with --check)
)";

[[noreturn]] void bad(const std::string& why) {
  std::fprintf(stderr, "strata-plan: %s\n", why.c_str());
  std::exit(2);
}

// A rate, a size or a latency in the units --help gives: 1e-6 to 1e9 of them, so that "inf" or
// 1e-300 cannot turn the table into infinities and 60-digit times.
double number(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    const double x = std::stod(v, &used);
    if (used == v.size() && x >= 1e-6 && x <= 1e9) return x;
  } catch (const std::exception&) {
  }
  bad(flag + " '" + v + "': expected a number from 1e-6 to 1e9");
}

// A count (layers, nodes, batch, ...): a whole number from 1 to `most`, "--batch 3.5" is not 3.
// The limits lie far above any model trained and keep the search to seconds.
int count(const std::string& flag, const std::string& v, int most = 1 << 30) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end || !(x >= 1 && x <= most) || x != std::floor(x)) {
    bad(flag + " '" + v + "': expected a whole number from 1 to " + std::to_string(most));
  }
  return int(x);
}

// How --check runs the layouts, from its options (`self`: this program's path, beside which
// strata-gpt and strata-run lie); a bad count exits before anything is measured or planned.
plan::Runner runner(std::map<std::string, std::string>& a, const std::string& self) {
  const std::string bin = self.substr(0, self.rfind('/') + 1);
  plan::Runner how;
  how.gpt = bin + "strata-gpt";
  how.launcher = a.count("--launcher") ? a["--launcher"] : bin + "strata-run -n {ranks}";
  how.workdir = a.count("--workdir") ? a["--workdir"] : "strata-plan-check";
  how.steps = a.count("--steps") ? count("--steps", a["--steps"]) : 6;
  if (how.steps < 2) bad("--steps 1: the timing is the median after the first step (2 or more)");
  how.rounds = a.count("--rounds") ? count("--rounds", a["--rounds"]) : 1;
  return how;
}

// --check: the `checks` layouts runs_to_check picks, run; --calibrate: refitted and saved.
// False when no run gave figures (a launcher or build that cannot run them).
bool check(plan::Request r, const std::vector<plan::Candidate>& ranked, int checks,
           const plan::Runner& how, std::map<std::string, std::string>& a) {
  std::filesystem::create_directories(how.workdir);
  const std::vector<plan::Candidate> ran = plan::runs_to_check(ranked, size_t(checks));
  // Rounds take the layouts in turn, so that a slow spell of a shared machine falls on all.
  std::vector<std::vector<plan::Measured>> rounds(ran.size());
  for (int k = 1; k <= how.rounds; ++k) {
    for (size_t i = 0; i < ran.size(); ++i) {
      std::fprintf(stderr, "strata-plan: running %s (round %d of %d)\n", ran[i].name.c_str(), k,
                   how.rounds);
      rounds[i].push_back(plan::run_layout(r, ran[i], how, k));
    }
  }
  std::vector<plan::Measured> measured;
  for (const auto& runs : rounds) measured.push_back(plan::middle_round(runs));
  std::printf(
      "\npredicted against measured (%d steps each, the median after the first; %d round%s):\n%s",
      how.steps, how.rounds, how.rounds > 1 ? "s, the middle one" : "",
      plan::check_table(ran, measured).c_str());
  std::printf("%s", plan::ranking_verdict(ran, measured).c_str());
  if (std::all_of(measured.begin(), measured.end(),
                  [](const plan::Measured& m) { return !m.error.empty(); })) {
    std::fprintf(stderr, "strata-plan: --check: no layout ran to figures (see %s)\n",
                 how.workdir.c_str());
    return false;
  }
  if (!a.count("--calibrate")) return true;
  const plan::Calibration k = plan::fit(r, ran, measured);
  plan::save(k, a["--calibrate"]);
  plan::apply(k, r.cluster);
  std::vector<plan::Candidate> refit = ran;
  for (plan::Candidate& c : refit) c.estimate = plan::estimate(c.layout, r.cluster, r.precision);
  std::printf(
      "\ncalibrated (%s: %.3g TFLOP/s, node %.3g GB/s %.3g us, network %.3g GB/s %.3g "
      "us, %.3g us a blocking exchange waits, at most %.2f of the computation; cp adds %.2f; "
      "%.3g core-s per GB hidden across nodes):\n%s",
      a["--calibrate"].c_str(), k.flops / 1e12, k.intra_gbs, k.intra_us, k.inter_gbs, k.inter_us,
      k.wait_us, k.wait_share, k.cp_extra, k.overlap_s_per_gb,
      plan::check_table(refit, measured).c_str());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  plan::use_trainer_blas_kernels(argv);
  std::map<std::string, std::string> a{
      {"--model", "small"}, {"--cluster", "live"},   {"--device", "h100"}, {"--nodes", "1"},
      {"--batch", "32"},    {"--precision", "fp32"}, {"--top", "10"}};
  const std::map<std::string, bool> known{
      {"--model", 1},    {"--layers", 1},    {"--hidden", 1},    {"--heads", 1},
      {"--seq", 1},      {"--vocab", 1},     {"--experts", 1},   {"--top-k", 1},
      {"--cluster", 1},  {"--device", 1},    {"--nodes", 1},     {"--gpu-memory", 1},
      {"--flops", 1},    {"--intra-gbs", 1}, {"--inter-gbs", 1}, {"--inter-latency-us", 1},
      {"--batch", 1},    {"--precision", 1}, {"--layout", 1},    {"--top", 1},
      {"--json", 1},     {"--check", 1},     {"--calibrate", 1}, {"--calibration", 1},
      {"--launcher", 1}, {"--steps", 1},     {"--rounds", 1},    {"--workdir", 1}};
  bool user_nodes = false;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    user_nodes |= f == "--nodes";
    if (f == "-h" || f == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (!known.count(f)) bad("unknown option '" + f + "' (--help lists them)");
    if (i + 1 >= argc) bad(f + " needs a value");
    a[f] = argv[++i];
  }
  // What only --check uses: named and its counts read before anything is measured or planned.
  for (const char* f : {"--steps", "--rounds", "--launcher", "--workdir", "--calibrate"}) {
    if (a.count(f) && !a.count("--check")) bad(std::string(f) + " needs --check (it runs layouts)");
  }
  const int checks = a.count("--check") ? count("--check", a["--check"]) : 0;
  const plan::Runner how = checks ? runner(a, argv[0]) : plan::Runner{};
  try {
    plan::Request r;
    r.precision = plan::precision_from_name(a["--precision"]);
    r.model = plan::model_preset(a["--model"]);
    gpt::Config& c = r.model.config;
    const std::tuple<const char*, int*, int> sizes[] = {
        {"--layers", &c.layers, 4096},  {"--hidden", &c.embd, 1 << 18},
        {"--heads", &c.heads, 1 << 14}, {"--seq", &c.ctx, 1 << 22},
        {"--vocab", &c.vocab, 1 << 22}, {"--experts", &c.experts, 4096},
        {"--top-k", &c.top_k, 4096}};
    for (const auto& [flag, field, most] : sizes) {
      if (a.count(flag)) *field = count(flag, a[flag], most), r.model.name = "custom";
    }
    // The parameter count, in floating point first: beyond 1e16 a size_t sum is near its limit.
    const double h = c.embd, rough = double(c.layers) * 12 * h * h * std::max(1, c.experts) +
                                     double(c.vocab + c.ctx) * h;
    if (rough > 1e16) {
      char text[32];
      std::snprintf(text, sizeof text, "%.2g", rough);
      bad(std::string("a model of about ") + text +
          " parameters is beyond what strata-plan models (1e16)");
    }
    c.num_params();  // the model's own checks (heads dividing the width, ...)
    r.batch = count("--batch", a["--batch"], 1 << 20);  // before measuring a live cluster
    const int top = count("--top", a["--top"]);
    const int nodes = count("--nodes", a["--nodes"]);
    const std::string& cl = a["--cluster"];
    // A strata-perf run and NxG say their own node count: --nodes there would be ignored.
    auto own_nodes = [&] {
      if (user_nodes) {
        bad("--nodes applies to --cluster live or a topology file; '" + cl +
            "' says its own node count");
      }
    };
    if (cl == "live") {
      r.cluster = plan::live_cluster(nodes);
    } else if (cl.size() > 5 && cl.ends_with(".json") && std::ifstream(cl)) {
      own_nodes();
      r.cluster = plan::cluster_from_perf(cl, r.precision);
    } else if (std::ifstream(cl)) {
      r.cluster = plan::cluster_from_file(cl, nodes, a["--device"], r.precision);
    } else {  // NxG, or an error naming the three forms
      own_nodes();
      r.cluster = plan::cluster_of(cl, a["--device"], r.precision);
    }
    if (a.count("--gpu-memory"))
      r.cluster.memory_bytes = number("--gpu-memory", a["--gpu-memory"]) * 1e9;
    if (a.count("--flops")) {
      r.cluster.flops = number("--flops", a["--flops"]) * 1e12;
      r.cluster.flops_source = "given";
    }
    if (a.count("--intra-gbs"))
      r.cluster.intra.bandwidth_gbs = number("--intra-gbs", a["--intra-gbs"]);
    if (a.count("--inter-gbs"))
      r.cluster.inter.bandwidth_gbs = number("--inter-gbs", a["--inter-gbs"]);
    if (a.count("--inter-latency-us")) {
      r.cluster.inter.latency_us = number("--inter-latency-us", a["--inter-latency-us"]);
    }
    if (a.count("--calibration")) plan::apply(plan::load(a["--calibration"]), r.cluster);
    r.layout = a.count("--layout") ? a["--layout"] : "";
    const auto ranked = plan::plan(r);
    std::fputs(plan::table(r, ranked, top).c_str(), stdout);
    if (a.count("--json")) {
      const std::string j = plan::json(r, ranked);
      if (a["--json"] == "-") {
        std::fputs(j.c_str(), stdout);
      } else if (!(std::ofstream(a["--json"]) << j)) {
        bad("--json '" + a["--json"] + "': cannot write");
      }
    }
    const bool fits = !ranked.empty() && ranked.front().refusal.empty();
    if (checks && fits && !check(r, ranked, checks, how, a)) return 1;
    return fits ? 0 : 1;
  } catch (const std::invalid_argument& e) {
    bad(e.what());
  } catch (const std::exception& e) {  // strata::Error: a topology file that does not parse
    bad(e.what());
  }
}
