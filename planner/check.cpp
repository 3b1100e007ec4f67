#include "check.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "descent.hpp"
#include "json_scan.hpp"
#include "validate/report_format.hpp"

namespace plan {
namespace {

const char* const kAxes[5] = {"tp", "pp", "dp", "ep", "cp"};

std::string flags(const Request& r, const gpt::TrainOptions& o, const std::string& json,
                  int steps) {
  const gpt::Config& c = o.model;
  std::ostringstream f;
  f << " train --config small --layers " << c.layers << " --heads " << c.heads << " --embd "
    << c.embd << " --ctx " << c.ctx;
  if (c.experts > 0) {
    f << " --experts " << c.experts << " --top-k " << c.top_k << " --moe-every " << c.moe_every;
  }
  f << " --tp " << o.tp << " --pp " << o.pp << " --ep " << o.ep << " --cp " << o.cp << " --cp-comm "
    << (o.cp_comm == gpt::CpComm::a2a ? "a2a" : "p2p") << (o.sp ? " --sp" : "") << " --schedule "
    << gpt::pp::schedule_name(o.schedule) << " --virtual-stages " << o.virtual_stages << " --stage "
    << o.stage << (o.recompute ? " --recompute" : "") << " --micro-batches " << o.micro_batches
    << " --batch " << r.batch << " --steps " << steps << " --eval-every 0 --json " << json;
  return f.str();
}

// "equal" when every group moved the bytes predicted (to a sum's rounding), else each that did
// not, with the measured's difference.
std::string bytes_verdict(const Bytes& b, const Measured& m) {
  const double predicted[5] = {b.tp, b.pp, b.dp, b.ep, b.cp};
  std::string r;
  for (int a = 0; a < 5; ++a) {
    if (gpt::rep::same(m.bytes[a], predicted[a])) continue;
    char s[48];
    std::snprintf(s, sizeof s, "%s%s %+.1f%%", r.empty() ? "" : ", ", kAxes[a],
                  predicted[a] > 0 ? (m.bytes[a] - predicted[a]) / predicted[a] * 100 : 100.0);
    r += s;
  }
  return r.empty() ? "equal" : r;
}

// A run that measured a step: what a calibration, a round and the verdict count.
bool measured_step(const Measured& m) { return m.error.empty() && m.step > 0; }

}  // namespace

std::vector<Candidate> runs_to_check(const std::vector<Candidate>& ranked, size_t n) {
  std::vector<Candidate> runs;
  auto shape = [](const gpt::TrainOptions& o) { return std::array{o.tp, o.pp, o.cp, o.ep}; };
  auto add_first = [&](auto wanted) {
    for (const Candidate& c : ranked) {
      const bool new_shape = std::none_of(runs.begin(), runs.end(), [&](const Candidate& d) {
        return shape(d.layout) == shape(c.layout);
      });
      if (runs.size() < n && c.refusal.empty() && new_shape && wanted(c.layout)) {
        runs.push_back(c);
        return;
      }
    }
  };
  // The top-ranked; data parallelism alone (the computation's own rate); then each axis alone
  // where a layout has it so, else with others: a fit that sees one axis only in company
  // cannot tell its cost from theirs.
  add_first([](const gpt::TrainOptions&) { return true; });
  add_first([&](const gpt::TrainOptions& o) { return shape(o) == std::array{1, 1, 1, 1}; });
  for (int axis = 0; axis < 4; ++axis) {
    const size_t before = runs.size();
    add_first([&](const gpt::TrainOptions& o) {
      const auto s = shape(o);
      return s[size_t(axis)] > 1 && s[0] * s[1] * s[2] * s[3] == s[size_t(axis)];
    });
    if (runs.size() == before) {
      add_first([&](const gpt::TrainOptions& o) { return shape(o)[size_t(axis)] > 1; });
    }
  }
  while (runs.size() < n) {
    const size_t before = runs.size();
    add_first([](const gpt::TrainOptions&) { return true; });
    if (runs.size() == before) break;
  }
  for (auto it = ranked.rbegin(); it != ranked.rend(); ++it) {
    if (!it->refusal.empty()) continue;
    const bool ran = std::any_of(runs.begin(), runs.end(),
                                 [&](const Candidate& d) { return d.name == it->name; });
    if (!ran) runs.push_back(*it);  // the control
    break;
  }
  return runs;
}

Measured run_layout(const Request& r, const Candidate& c, const Runner& how, int round) {
  Measured m;
  if (r.model.config.vocab != 65) {
    m.error = "strata-gpt trains the bundled corpus (vocabulary 65), not " +
              std::to_string(r.model.config.vocab);
    return m;
  }
  if (r.precision != Precision::fp32) {
    m.error = "strata-gpt trains in fp32, not " + std::string(precision_name(r.precision));
    return m;
  }
  std::string launcher = how.launcher;
  const size_t at = launcher.find("{ranks}");
  if (at != std::string::npos) launcher.replace(at, 7, std::to_string(r.cluster.devices()));
  const std::string base =
      how.workdir + "/" + c.name + (how.rounds > 1 ? ".r" + std::to_string(round) : "");
  const std::string cmd = launcher + " " + how.gpt + flags(r, c.layout, base + ".json", how.steps) +
                          " > " + base + ".log 2>&1";
  std::remove((base + ".json").c_str());
  const int status = std::system(cmd.c_str());
  if (status != 0) {
    m.error = "exit " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + " (" + base +
              ".log)";
    return m;
  }
  std::ifstream in(base + ".json");
  const std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t pos = 0;
  const size_t all = s.size();
  m.params = number_after(s, pos, "param_bytes", all);
  m.grads = number_after(s, pos, "grad_bytes", all);
  m.optimizer = number_after(s, pos, "optimizer_bytes", all);
  m.activations = number_after(s, pos, "activation_bytes", all);
  // Every step after the first (its allocations and first contacts), by step time.
  struct Step {
    double seconds, bubble, comm[5], exposed[5], bytes[5];
  };
  std::vector<Step> steps;
  for (size_t k = s.find("{\"step\": ", pos); k != std::string::npos;
       k = s.find("{\"step\": ", k + 1)) {
    const size_t end = std::min(s.find("{\"step\": ", k + 1), all);
    size_t p = k;
    Step st{};
    st.seconds = number_after(s, p, "seconds", end);
    st.bytes[2] = number_after(s, p, "dp_bus_bytes", end);
    st.bytes[3] = number_after(s, p, "ep_bus_bytes", end);
    st.bytes[4] = number_after(s, p, "cp_bytes", end);
    st.bubble = number_after(s, p, "bubble", end);  // stage 0's, with its tp and pp bytes
    st.bytes[0] = number_after(s, p, "tp_bus_bytes", end);
    st.bytes[1] = number_after(s, p, "pp_bytes", end);
    for (int a = 0; a < 5; ++a) {
      size_t q = s.find("\"" + std::string(kAxes[a]) + "\": {\"comm", k);
      st.comm[a] = number_after(s, q, "comm_seconds", end);
      st.exposed[a] = number_after(s, q, "exposed_seconds", end);
    }
    steps.push_back(st);
  }
  if (steps.size() < 2 || std::isnan(m.params)) {
    m.error = "no step figures in " + base + ".json";
    return m;
  }
  steps.erase(steps.begin());
  std::sort(steps.begin(), steps.end(),
            [](const Step& a, const Step& b) { return a.seconds < b.seconds; });
  const Step& median = steps[steps.size() / 2];
  m.step = m.step_min = m.step_max = median.seconds;
  m.bubble = std::isnan(median.bubble) ? 0 : median.bubble * median.seconds;
  for (int a = 0; a < 5; ++a) {
    m.comm[a] = std::isnan(median.comm[a]) ? 0 : median.comm[a];
    m.exposed[a] = std::isnan(median.exposed[a]) ? 0 : median.exposed[a];
    m.bytes[a] = std::isnan(median.bytes[a]) ? 0 : median.bytes[a];
  }
  return m;
}

Measured middle_round(const std::vector<Measured>& rounds) {
  std::vector<const Measured*> ok;
  for (const Measured& m : rounds) {
    if (measured_step(m)) ok.push_back(&m);
  }
  if (ok.empty()) return rounds.empty() ? Measured{.error = "no round ran"} : rounds.front();
  std::sort(ok.begin(), ok.end(), [](auto* a, auto* b) { return a->step < b->step; });
  Measured m = *ok[(ok.size() - 1) / 2];
  m.rounds = int(ok.size());
  m.step_min = ok.front()->step, m.step_max = ok.back()->step;
  return m;
}

Calibration fit(const Request& r, const std::vector<Candidate>& ran,
                const std::vector<Measured>& measured) {
  // The figures that make the predicted step times closest to the measured (least squares of
  // the relative errors), by descent over the compute rate, the wait of a blocking exchange and,
  // across nodes, the network's bandwidth and latency. The node's link stays as the topology or
  // strata-perf gave it: on one node, what a run adds to a memory copy is waiting for peers,
  // and a fit that may lower the link's bandwidth to say so inflates every byte-bound term.
  std::vector<size_t> ok;
  for (size_t i = 0; i < ran.size(); ++i) {
    if (measured_step(measured[i])) ok.push_back(i);
  }
  if (ok.empty()) throw std::runtime_error("no run measured anything to calibrate from");
  ClusterSpec c = r.cluster;
  if (c.wait_us <= 0) c.wait_us = 1;  // a start the descent's factors can move
  if (c.cp_extra <= 0) c.cp_extra = 0.01;
  std::vector<double*> figures{&c.flops, &c.wait_us, &c.wait_share};
  // A share of computation only context-parallel runs can tell.
  if (std::any_of(ok.begin(), ok.end(), [&](size_t i) { return ran[i].layout.cp > 1; })) {
    figures.push_back(&c.cp_extra);
  }
  if (r.cluster.nodes > 1)
    figures.insert(figures.end(), {&c.inter.bandwidth_gbs, &c.inter.latency_us});
  if (r.cluster.nodes > 1 && r.cluster.cores > 0) {  // hidden transfers on shared cores
    if (c.overlap_s_per_gb <= 0) c.overlap_s_per_gb = 1;
    figures.push_back(&c.overlap_s_per_gb);
  }
  descend(figures, [&] {
    double e = 0;
    for (size_t i : ok) {
      const double pred = estimate(ran[i].layout, c, r.precision).time.step();
      const double rel = (pred - measured[i].step) / measured[i].step;
      e += rel * rel;
    }
    return e;
  });
  return {c.flops,
          c.rows_half,
          c.intra.bandwidth_gbs,
          c.intra.latency_us,
          c.inter.bandwidth_gbs,
          c.inter.latency_us,
          c.wait_us,
          c.wait_share,
          c.cp_extra,
          c.overlap_s_per_gb};
}

void apply(const Calibration& k, ClusterSpec& c) {
  c.flops = k.flops, c.rows_half = k.rows_half;
  c.flops_source = "calibrated";
  c.intra.bandwidth_gbs = k.intra_gbs, c.intra.latency_us = k.intra_us;
  c.inter.bandwidth_gbs = k.inter_gbs, c.inter.latency_us = k.inter_us;
  c.wait_us = k.wait_us, c.wait_share = k.wait_share, c.cp_extra = k.cp_extra;
  c.overlap_s_per_gb = k.overlap_s_per_gb;
}

void save(const Calibration& k, const std::string& path) {
  std::ofstream f(path);
  f.precision(9);
  f << "# strata-plan --calibrate: sustained FLOP/s per device and the rows of a micro-batch that "
       "run at half that; links in GB/s and us; a blocking exchange's wait (us) and the most of "
       "the computation waits add up to; context parallelism's extra computation (share); "
       "core-seconds per GB of hidden transfers across nodes\n"
    << "flops = " << k.flops << "\nrows_half = " << k.rows_half << "\nintra_gbs = " << k.intra_gbs
    << "\nintra_us = " << k.intra_us << "\ninter_gbs = " << k.inter_gbs
    << "\ninter_us = " << k.inter_us << "\nwait_us = " << k.wait_us
    << "\nwait_share = " << k.wait_share << "\ncp_extra = " << k.cp_extra
    << "\noverlap_s_per_gb = " << k.overlap_s_per_gb << "\n";
  if (!f) throw std::invalid_argument("--calibrate '" + path + "': cannot write");
}

Calibration load(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::invalid_argument("--calibration '" + path + "': cannot read");
  Calibration k;
  std::pair<const char*, double*> keys[] = {
      {"flops", &k.flops},         {"rows_half", &k.rows_half},
      {"intra_gbs", &k.intra_gbs}, {"intra_us", &k.intra_us},
      {"inter_gbs", &k.inter_gbs}, {"inter_us", &k.inter_us},
      {"wait_us", &k.wait_us},     {"wait_share", &k.wait_share},
      {"cp_extra", &k.cp_extra},   {"overlap_s_per_gb", &k.overlap_s_per_gb}};
  int line_no = 0, found = 0;
  for (std::string line; std::getline(f, line);) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    char key[32];
    double v = 0;
    bool known = false;
    if (std::sscanf(line.c_str(), "%31s = %lf", key, &v) == 2 &&
        (v > 0 || (v == 0 && (std::string(key) == "overlap_s_per_gb" ||  // one node's fit
                              std::string(key) == "rows_half")))) {      // no curve (GPUs)
      for (auto& [name, field] : keys) {
        if (std::string(key) == name) *field = v, known = true, ++found;
      }
    }
    if (!known) {
      throw std::invalid_argument("--calibration '" + path + "' line " + std::to_string(line_no) +
                                  ": '" + line + "' (expected key = positive number)");
    }
  }
  if (found != 10) {
    throw std::invalid_argument(
        "--calibration '" + path +
        "': needs flops, rows_half, intra_gbs, intra_us, inter_gbs, inter_us, "
        "wait_us, wait_share, cp_extra and overlap_s_per_gb");
  }
  return k;
}

std::string check_table(const std::vector<Candidate>& ran, const std::vector<Measured>& measured) {
  std::ostringstream o;
  char line[400];
  std::snprintf(line, sizeof line, "%-48s %21s %8s %19s %19s %19s %21s  %s\n", "layout",
                "step ms pred / meas", "error", "work ms", "exposed ms", "bubble ms",
                "activations MB", "bytes per group");
  o << line;
  for (size_t i = 0; i < ran.size(); ++i) {
    const Candidate& c = ran[i];
    const Measured& m = measured[i];
    if (!m.error.empty()) {
      o << c.name << ": " << m.error << "\n";
      continue;
    }
    const Time& t = c.estimate.time;
    double exposed = 0, pred_exposed = t.step() - t.compute - t.bubble;
    for (int a = 0; a < 5; ++a) exposed += m.exposed[a];
    std::snprintf(line, sizeof line,
                  "%-48s %9.1f / %9.1f %+7.0f%% %8.1f / %8.1f %8.1f / %8.1f %8.1f / %8.1f "
                  "%9.1f / %9.1f  %s\n",
                  c.name.c_str(), t.step() * 1e3, m.step * 1e3, (t.step() - m.step) / m.step * 100,
                  (t.compute + t.bubble) * 1e3, (m.step - exposed) * 1e3, pred_exposed * 1e3,
                  exposed * 1e3, t.bubble * 1e3, m.bubble * 1e3,
                  c.estimate.memory.activations / 1e6, m.activations / 1e6,
                  bytes_verdict(c.estimate.bytes, m).c_str());
    std::string row = line;
    if (m.rounds > 1) {  // the steps' range beside the bytes' verdict
      char range[64];
      std::snprintf(range, sizeof range, "  (%d rounds, %.1f-%.1f ms)", m.rounds, m.step_min * 1e3,
                    m.step_max * 1e3);
      row.insert(row.size() - 1, range);
    }
    o << row;
  }
  return o.str();
}

std::string ranking_verdict(const std::vector<Candidate>& ran,
                            const std::vector<Measured>& measured) {
  if (ran.empty() || !measured_step(measured[0])) return {};
  size_t fastest = 0;
  for (size_t i = 1; i < ran.size(); ++i) {
    if (measured_step(measured[i]) && measured[i].step < measured[fastest].step) fastest = i;
  }
  if (fastest == 0) return "the top-ranked, " + ran[0].name + ", measured the fastest\n";
  char line[300];
  std::snprintf(
      line, sizeof line,
      "the top-ranked, %s, measured %.0f %% slower than the fastest, %s (%.1f / %.1f ms)\n",
      ran[0].name.c_str(), (measured[0].step / measured[fastest].step - 1) * 100,
      ran[fastest].name.c_str(), measured[0].step * 1e3, measured[fastest].step * 1e3);
  return line;
}

}  // namespace plan
