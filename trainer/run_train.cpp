// strata-gpt train: data-parallel training with a live line per step, validation every K steps,
// checkpoints, a loss-curve SVG, JSON metrics and a sample of the trained model.
#include <cstdio>
#include <fstream>

#include "modes.hpp"
#include "loss_plot.hpp"

namespace gpt {

namespace {

std::string json_escape(const std::string& s) {
  std::string o;
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\', o += char(ch);
    else if (ch == '\n') o += "\\n";
    else if (ch < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", ch);
      o += b;
    } else o += char(ch);
  }
  return o;
}

void write_json(const std::string& path, const RunOptions& r, int ranks,
                const std::vector<StepReport>& steps, const std::vector<std::pair<int, float>>& val,
                const std::string& sample) {
  std::ofstream f(path);
  const Config& c = r.train.model;
  f << "{\"ranks\": " << ranks << ", \"stage\": " << r.train.stage << ", \"config\": {\"vocab\": "
    << c.vocab << ", \"ctx\": " << c.ctx << ", \"layers\": " << c.layers << ", \"heads\": "
    << c.heads << ", \"embd\": " << c.embd << ", \"params\": " << c.num_params()
    << "}, \"global_batch\": " << r.train.global_batch << ",\n \"steps\": [";
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepReport& s = steps[i];
    char line[256];
    std::snprintf(line, sizeof line,
                  "%s\n  {\"step\": %d, \"loss\": %.9g, \"lr\": %.6g, \"seconds\": %.6f, "
                  "\"comm_seconds\": %.6f, \"exposed_seconds\": %.6f}",
                  i ? "," : "", s.step, s.loss, s.lr, s.seconds, s.comm_seconds,
                  s.exposed_seconds);
    f << line;
  }
  f << "],\n \"val\": [";
  for (size_t i = 0; i < val.size(); ++i)
    f << (i ? ", " : "") << "{\"step\": " << val[i].first << ", \"loss\": " << val[i].second << "}";
  f << "],\n \"sample\": \"" << json_escape(sample) << "\"}\n";
  if (!f) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int run_train(strata::Communicator& world, const CharCorpus& data, const RunOptions& r) {
  const bool lead = world.rank() == 0;
  TrainOptions o = r.train;
  Trainer t(world, data, o);
  if (!r.resume.empty()) {
    t.load(r.resume);
    if (lead) std::printf("resumed from %s at step %d\n", r.resume.c_str(), t.steps_done());
  }
  const Config& c = o.model;
  if (lead)
    std::printf("strata-gpt: %zu parameters (L %d, H %d, C %d, T %d, V %d), %d ranks, ZeRO stage "
                "%d, global batch %d x %d tokens, %d steps\n",
                c.num_params(), c.layers, c.heads, c.embd, c.ctx, c.vocab, world.size(), o.stage,
                o.global_batch, c.ctx, o.steps);
  std::vector<StepReport> steps;
  std::vector<std::pair<int, float>> train_curve, val_curve;
  auto validate = [&](int step) {
    const float v = t.evaluate(r.eval_batches);
    val_curve.emplace_back(step, v);
    if (lead) std::printf("step %5d  val loss %.4f\n", step, v);
  };
  while (t.steps_done() < o.steps) {
    const StepReport s = t.step();
    steps.push_back(s);
    train_curve.emplace_back(s.step, s.loss);
    if (lead && !r.quiet) {
      const double tok = double(o.global_batch) * c.ctx / s.seconds;
      std::printf("step %5d/%d  loss %.4f  lr %.2e  %8.0f tok/s  %6.1f ms  comm %3.0f%%  "
                  "exposed %3.0f%%\n",
                  s.step + 1, o.steps, s.loss, s.lr, tok, 1e3 * s.seconds,
                  100 * s.comm_seconds / s.seconds, 100 * s.exposed_seconds / s.seconds);
      std::fflush(stdout);
    }
    const int done = t.steps_done();
    if (r.eval_every > 0 && (done % r.eval_every == 0 || done == o.steps)) validate(done);
    if (!r.save.empty() && ((r.save_every > 0 && done % r.save_every == 0) || done == o.steps))
      t.save(r.save);
  }
  std::string text;
  if (r.sample_chars > 0) {
    text = t.sample("ROMEO:\n", r.sample_chars, 0.8f, o.seed);
    if (lead) std::printf("--- sample ---\nROMEO:\n%s\n--------------\n", text.c_str());
  }
  if (lead && !r.plot.empty()) {
    const std::string title = "strata-gpt: " + std::to_string(c.num_params()) + " parameters, " +
                              std::to_string(world.size()) + " ranks, stage " +
                              std::to_string(o.stage);
    if (!write_loss_plot(r.plot, title, train_curve, val_curve))
      throw std::runtime_error("cannot write " + r.plot);
    std::printf("loss curve: %s\n", r.plot.c_str());
  }
  if (lead && !r.json.empty()) write_json(r.json, r, world.size(), steps, val_curve, text);
  return 0;
}

}  // namespace gpt
