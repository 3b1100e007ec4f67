// strata-gpt train: data-parallel training with a live line per step, validation every K steps,
// checkpoints, a loss-curve SVG, JSON metrics and a sample of the trained model.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "modes.hpp"
#include "validate/layout_formulas.hpp"
#include "validate/loss_plot.hpp"

namespace gpt {

namespace {

std::string json_escape(const std::string& s) {
  std::string o;
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\')
      o += '\\', o += char(ch);
    else if (ch == '\n')
      o += "\\n";
    else if (ch < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", ch);
      o += b;
    } else
      o += char(ch);
  }
  return o;
}

void write_json(const std::string& path, const RunOptions& r, int ranks,
                const strata::MemoryReport& memory, size_t activation_bytes,
                const std::vector<StepReport>& steps, const std::vector<std::pair<int, float>>& val,
                const std::string& sample) {
  std::ofstream f(path);
  const Config& c = r.train.model;
  f << "{\"ranks\": " << ranks << ", \"layout\": \"" << layout_name(r.train, ranks)
    << "\", \"tp\": " << r.train.tp << ", \"pp\": " << r.train.pp
    << ", \"sp\": " << (r.train.sp ? "true" : "false")
    << ", \"micro_batches\": " << r.train.micro_batches
    << ", \"memory\": {\"param_bytes\": " << memory.param_bytes
    << ", \"grad_bytes\": " << memory.grad_bytes
    << ", \"optimizer_bytes\": " << memory.optimizer_bytes
    << ", \"offloaded_optimizer_bytes\": " << memory.offloaded_optimizer_bytes
    << ", \"offloaded_param_bytes\": " << memory.offloaded_param_bytes
    << ", \"activation_bytes\": " << activation_bytes << "}"
    << ", \"stage\": " << r.train.stage << ", \"config\": {\"vocab\": " << c.vocab
    << ", \"ctx\": " << c.ctx << ", \"layers\": " << c.layers << ", \"heads\": " << c.heads
    << ", \"embd\": " << c.embd << ", \"params\": " << c.num_params()
    << "}, \"global_batch\": " << r.train.global_batch << ",\n \"steps\": [";
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepReport& s = steps[i];
    char line[400];
    std::snprintf(line, sizeof line,
                  "%s\n  {\"step\": %d, \"loss\": %.9g, \"lr\": %.6g, \"seconds\": %.6f, "
                  "\"comm_seconds\": %.6f, \"exposed_seconds\": %.6f, \"dp_bus_bytes\": %.0f, "
                  "\"grad_norm\": %.6g, \"ep_bytes\": %.0f, \"ep_seconds\": %.6f, "
                  "\"ep_bus_bytes\": %.0f, \"cp_bytes\": %.0f, \"cp_seconds\": %.6f, "
                  "\"outer_bytes\": %.0f, \"outer_seconds\": %.6f, \"stages\": [",
                  i ? "," : "", s.step, s.loss, s.lr, s.seconds, s.comm_seconds, s.exposed_seconds,
                  s.bus_bytes, s.grad_norm, s.ep_bytes, s.ep_seconds, s.ep_bus_bytes, s.cp_bytes,
                  s.cp_seconds, s.outer_bytes, s.outer_seconds);
    f << line;
    for (size_t k = 0; k < s.stages.size(); ++k) {
      const StepReport::Stage& g = s.stages[k];
      std::snprintf(line, sizeof line,
                    "%s{\"bubble\": %.4f, \"pass_seconds\": %.6f, \"tp_bus_bytes\": %.0f, "
                    "\"pp_bytes\": %.0f}",
                    k ? ", " : "", g.bubble, g.pass_seconds, g.tp_bus_bytes, g.pp_bytes);
      f << line;
    }
    f << "], \"axes\": {";
    const std::pair<const char*, const StepReport::Axis*> axes[] = {{"tp", &s.axes.tp},
                                                                    {"pp", &s.axes.pp},
                                                                    {"dp", &s.axes.dp},
                                                                    {"ep", &s.axes.ep},
                                                                    {"cp", &s.axes.cp}};
    for (size_t k = 0; k < 5; ++k) {
      std::snprintf(line, sizeof line,
                    "%s\"%s\": {\"comm_seconds\": %.6f, \"exposed_seconds\": %.6f}", k ? ", " : "",
                    axes[k].first, axes[k].second->comm, axes[k].second->exposed);
      f << line;
    }
    f << "}";
    if (!s.experts.empty()) {
      f << ", \"experts\": [";
      for (size_t k = 0; k < s.experts.size(); ++k) {
        const StepReport::Experts& x = s.experts[k];
        std::snprintf(line, sizeof line,
                      "%s{\"layer\": %d, \"tokens_min\": %.0f, \"tokens_mean\": %.3f, "
                      "\"tokens_max\": %.0f, \"dropped\": %.0f, \"a2a_bytes\": %.0f, "
                      "\"a2a_bytes_formula\": %.0f, \"a2a_seconds\": %.6f}",
                      k ? ", " : "", x.layer, x.min, x.mean, x.max, x.dropped, x.a2a_bytes,
                      x.a2a_bytes_formula, x.a2a_seconds);
        f << line;
      }
      f << "]";
    }
    f << "}";
  }
  f << "],\n \"val\": [";
  for (size_t i = 0; i < val.size(); ++i)
    f << (i ? ", " : "") << "{\"step\": " << val[i].first << ", \"loss\": " << val[i].second << "}";
  f << "],\n \"sample\": \"" << json_escape(sample) << "\"}\n";
  if (!f) throw std::runtime_error("cannot write " + path);
}

// Per stage (its first rank): parameters, gradients and optimizer state against the formula for
// the layout, and the activation memory its slots hold.
void print_memory(strata::Communicator& world, const Trainer& t, const TrainOptions& o) {
  const strata::MemoryReport m = t.engine().memory();
  // Offloaded, the state the formula counts is in the file (none under SGD, whose file holds the
  // parameters only); the window is resident.
  const bool off = m.offloaded_optimizer_bytes > 0 || m.offloaded_param_bytes > 0;
  const size_t state = off ? m.offloaded_optimizer_bytes : m.optimizer_bytes;
  std::vector<int64_t> mine{int64_t(m.param_bytes + m.offloaded_param_bytes),
                            int64_t(m.grad_bytes),
                            int64_t(state),
                            int64_t(t.activation_bytes()),
                            int64_t(off ? m.optimizer_bytes : state),
                            int64_t(m.offloaded_param_bytes)};
  std::vector<int64_t> all(mine.size() * size_t(world.size()));
  world.all_gather(strata::buffer(mine), strata::buffer(all)).wait();
  if (world.rank() != 0) return;
  // Ranks of one island (all alike): the first's. A joining job is one island.
  const int island = training_ranks(o, world.size()) / o.islands;
  for (int s = 0; s < o.pp; ++s) {
    const int64_t* g = all.data() + size_t(s) * size_t(island / o.pp) * mine.size();
    const Memory f = memory_formula(o, island, s);
    const bool equal = size_t(g[0]) == f.param_bytes && size_t(g[1]) == f.grad_bytes &&
                       size_t(g[2]) == f.optimizer_bytes;
    std::string resident =
        g[4] != g[2] ? ", " + std::to_string(g[4]) + " B resident, the rest on disk" : "";
    if (g[5] > 0) resident += "; the parameter shard on disk too";
    std::printf(
        "memory per rank%s: params %lld B, grads %lld B, optimizer %lld B (%s the formula%s), "
        "activations %lld B\n",
        o.pp > 1 ? (" of stage " + std::to_string(s)).c_str() : "", (long long)g[0],
        (long long)g[1], (long long)g[2], equal ? "equal to" : "DIFFERENT from", resident.c_str(),
        (long long)g[3]);
  }
}

void print_step(const StepReport& s, const TrainOptions& o) {
  const double tok = double(o.global_batch) * o.model.ctx / s.seconds;
  // Every axis's share of the step: its communication, and the part this rank waited for.
  const std::pair<const char*, const StepReport::Axis*> axes[] = {{"dp", &s.axes.dp},
                                                                  {"tp", &s.axes.tp},
                                                                  {"pp", &s.axes.pp},
                                                                  {"ep", &s.axes.ep},
                                                                  {"cp", &s.axes.cp}};
  double comm = 0, exposed = 0;
  std::string each;
  for (const auto& [name, a] : axes) {
    comm += a->comm, exposed += a->exposed;
    const bool used = std::string(name) == "dp"   ? a->comm > 0
                      : std::string(name) == "tp" ? o.tp > 1
                      : std::string(name) == "pp" ? o.pp > 1
                      : std::string(name) == "ep" ? o.ep > 1
                                                  : o.cp > 1;
    if (!used) continue;
    char part[48];
    std::snprintf(part, sizeof part, "%s%s %.0f/%.0f", each.empty() ? "" : " ", name,
                  100 * a->comm / s.seconds, 100 * a->exposed / s.seconds);
    each += part;
  }
  std::printf(
      "step %5d/%d  loss %.4f  lr %.2e  %8.0f tok/s  %6.1f ms  comm %3.0f%%  exposed %3.0f%% (%s)",
      s.step + 1, o.steps, s.loss, s.lr, tok, 1e3 * s.seconds, 100 * comm / s.seconds,
      100 * exposed / s.seconds, each.c_str());
  if (s.grad_norm > 0) std::printf("  gnorm %.3f", s.grad_norm);
  if (o.pp > 1) {
    std::printf("  bubble");
    for (size_t k = 0; k < s.stages.size(); ++k)
      std::printf("%s%.0f%%", k ? "/" : " ", 100 * s.stages[k].bubble);
  }
  if (o.tp > 1) std::printf("  tp %.2f MB", s.tp_bus_bytes / 1e6);
  if (o.pp > 1) std::printf("  pp %.2f MB", s.pp_bytes / 1e6);
  if (o.cp > 1) std::printf("  cp %.2f MB", s.cp_bytes / 1e6);
  if (s.outer)
    std::printf("  outer step %.2f MB %.1f ms", s.outer_bytes / 1e6, 1e3 * s.outer_seconds);
  if (o.ep > 1)  // the exchanges' rows and the dense gradients' average
    std::printf("  ep a2a %.2f MB avg %.2f MB", s.ep_bytes / 1e6, s.ep_bus_bytes / 1e6);
  if (!s.experts.empty()) {  // over every MoE block: the least, mean, most tokens an expert took
    double lo = s.experts[0].min, mean = 0, hi = 0, dropped = 0;
    for (const auto& x : s.experts) {
      lo = std::min(lo, x.min), hi = std::max(hi, x.max);
      mean += x.mean / double(s.experts.size()), dropped += x.dropped;
    }
    std::printf("  experts %.0f/%.0f/%.0f tok  dropped %.0f", lo, mean, hi, dropped);
  }
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

int run_train(strata::Communicator& world, const CharCorpus& data, const RunOptions& r) {
  const int ranks = training_ranks(r.train, world.size());
  TrainOptions o = r.train;
  Trainer t(world, data, o);
  auto lead = [&t] { return t.leads(); };  // moves to the next island when island 0 is lost
  if (!r.resume.empty()) {
    t.load(r.resume);
    if (t.steps_done() >= o.steps)  // the same on every rank: bad input, exit 2
      throw std::invalid_argument("--resume " + r.resume + " is at step " +
                                  std::to_string(t.steps_done()) + ", at or past --steps " +
                                  std::to_string(o.steps) + ": nothing to train");
    if (lead()) std::printf("resumed from %s at step %d\n", r.resume.c_str(), t.steps_done());
  }
  const Config& c = o.model;
  if (lead())
    std::printf(
        "strata-gpt: %zu parameters (L %d, H %d, C %d, T %d, V %d), %d ranks as %s, "
        "global batch %d x %d tokens, %d micro-batches, %d steps; OpenBLAS %s, %d thread%s\n",
        c.num_params(), c.layers, c.heads, c.embd, c.ctx, c.vocab, ranks,
        layout_name(o, ranks).c_str(), o.global_batch, c.ctx, o.micro_batches, o.steps,
        blas_kernel().c_str(), blas_threads(), blas_threads() == 1 ? "" : "s");
  print_memory(world, t, o);
  std::vector<StepReport> steps;
  std::vector<std::pair<int, float>> train_curve, val_curve;
  auto validate = [&](int step) {
    const float v = t.evaluate(r.eval_batches);
    val_curve.emplace_back(step, v);
    if (lead()) std::printf("step %5d  val loss %.4f\n", step, v);
  };
  while (t.steps_done() < o.steps) {
    const StepReport s = t.step();
    steps.push_back(s);
    train_curve.emplace_back(s.step, s.loss);
    if (lead() && !r.quiet) print_step(s, o);
    const int done = t.steps_done();
    if (r.eval_every > 0 && (done % r.eval_every == 0 || done == o.steps)) validate(done);
    if (!r.save.empty() && ((r.save_every > 0 && done % r.save_every == 0) || done == o.steps))
      t.save(r.save);
  }
  std::string text;
  if (r.sample_chars > 0) {
    text = t.sample("ROMEO:\n", r.sample_chars, 0.8f, o.seed);
    if (lead()) std::printf("--- sample ---\nROMEO:\n%s\n--------------\n", text.c_str());
  }
  if (lead() && !r.plot.empty()) {
    const std::string title = "strata-gpt: " + std::to_string(c.num_params()) + " parameters, " +
                              std::to_string(ranks) + " ranks, stage " + std::to_string(o.stage);
    if (!write_loss_plot(r.plot, title, train_curve, val_curve))
      throw std::runtime_error("cannot write " + r.plot);
    std::printf("loss curve: %s\n", r.plot.c_str());
  }
  if (lead() && !r.json.empty())
    write_json(r.json, r, ranks, t.engine().memory(), t.activation_bytes(), steps, val_curve, text);
  return 0;
}

}  // namespace gpt
