#include "report.hpp"

#include <cstdio>
#include <sstream>

namespace plan {
namespace {

std::string fmt(const char* f, double v) {
  char s[64];
  std::snprintf(s, sizeof s, f, v);
  return s;
}

// Seconds in the unit that keeps three digits.
std::string seconds(double s) {
  if (s == 0) return "0";
  if (s < 1e-3) return fmt("%.0f us", s * 1e6);
  if (s < 1) return fmt("%.1f ms", s * 1e3);
  return fmt("%.2f s", s);
}

std::string gb(double bytes) { return fmt(bytes < 1e8 ? "%.3f" : "%.1f", bytes / 1e9); }

std::string header(const Request& r) {
  const gpt::Config& c = r.model.config;
  std::ostringstream o;
  o << "model   " << r.model.name << ": " << fmt("%.3g", double(c.num_params())) << " parameters, "
    << c.layers << " layers of " << c.embd << ", " << c.heads << " heads, " << c.ctx
    << " positions, vocabulary " << c.vocab;
  if (c.experts > 0) o << ", " << c.experts << " experts top-" << c.top_k;
  o << "\ncluster " << r.cluster.description << ": " << r.cluster.devices() << " devices of "
    << gb(r.cluster.memory_bytes) << " GB, " << fmt("%.3g", r.cluster.flops / 1e12)
    << " TFLOP/s each (" << r.cluster.flops_source;
  if (r.cluster.rows_half > 0)
    o << "; half that at " << fmt("%.0f", r.cluster.rows_half) << " rows";
  o << "); links: node " << r.cluster.intra.bandwidth_gbs << " GB/s " << r.cluster.intra.latency_us
    << " us, network " << r.cluster.inter.bandwidth_gbs << " GB/s " << r.cluster.inter.latency_us
    << " us";
  if (r.cluster.wait_us > 0)
    o << ", " << fmt("%.3g", r.cluster.wait_us) << " us a blocking exchange waits";
  o << "\n"
    << "train   " << precision_name(r.precision) << ", global batch " << r.batch << " sequences\n";
  return o.str();
}

std::string row(const Candidate& c) {
  const Time& t = c.estimate.time;
  const Memory& m = c.estimate.memory;
  std::ostringstream o;
  char line[320];
  std::snprintf(line, sizeof line, "%-48s %9s %9s %9s %8s %8s %8s %8s %8s  %6s %6s %6s %6s %6s %6s",
                c.name.c_str(), seconds(t.step()).c_str(), seconds(t.compute).c_str(),
                seconds(t.bubble).c_str(), seconds(t.tp.exposed).c_str(),
                seconds(t.pp.exposed).c_str(), seconds(t.dp.exposed).c_str(),
                seconds(t.ep.exposed).c_str(), seconds(t.cp.exposed).c_str(), gb(m.params).c_str(),
                gb(m.grads).c_str(), gb(m.optimizer).c_str(), gb(m.activations).c_str(),
                gb(m.buffers).c_str(), gb(m.total()).c_str());
  o << line << "\n";
  return o.str();
}

}  // namespace

std::string table(const Request& r, const std::vector<Candidate>& ranked, int top) {
  std::ostringstream o;
  o << header(r) << "\n";
  char line[320];
  std::snprintf(line, sizeof line,
                "%-48s %9s %9s %9s %8s %8s %8s %8s %8s  %6s %6s %6s %6s %6s %6s\n", "layout",
                "step", "compute", "bubble", "tp", "pp", "dp", "ep", "cp", "param", "grad", "optim",
                "activ", "buffer", "GB");
  o << line;
  int shown = 0, fitting = 0;
  for (const Candidate& c : ranked) fitting += c.refusal.empty();
  for (const Candidate& c : ranked) {
    if (!c.refusal.empty() || shown == top) break;
    o << row(c);
    ++shown;
  }
  if (ranked.size() == 1 && !ranked[0].refusal.empty()) {
    o << ranked[0].name << ": " << ranked[0].refusal << "\n";
  } else if (fitting == 0 && !ranked.empty()) {
    o << "no layout fits; the smallest: " << ranked[0].name << ": " << ranked[0].refusal << "\n";
  }
  o << "\n"
    << fitting << " of " << ranked.size()
    << " layouts fit; times are exposed seconds per step (tp, pp, dp, ep, cp: communication the "
       "step waits for), memory GB per device on the fullest stage\n";
  return o.str();
}

std::string json(const Request& r, const std::vector<Candidate>& ranked) {
  std::ostringstream o;
  o.precision(6);
  o << "{\"model\": \"" << r.model.name << "\", \"parameters\": " << r.model.config.num_params()
    << ", \"cluster\": \"" << r.cluster.description << "\", \"devices\": " << r.cluster.devices()
    << ", \"device_memory\": " << r.cluster.memory_bytes << ", \"flops\": " << r.cluster.flops
    << ", \"rows_half\": " << r.cluster.rows_half << ", \"wait_us\": " << r.cluster.wait_us
    << ", \"precision\": \"" << precision_name(r.precision) << "\", \"batch\": " << r.batch
    << ", \"layouts\": [";
  for (size_t i = 0; i < ranked.size(); ++i) {
    const Candidate& c = ranked[i];
    const Time& t = c.estimate.time;
    const Memory& m = c.estimate.memory;
    o << (i ? ",\n  " : "\n  ") << "{\"layout\": \"" << c.name
      << "\", \"fits\": " << (c.refusal.empty() ? "true" : "false") << ", \"step\": " << t.step()
      << ", \"compute\": " << t.compute << ", \"bubble\": " << t.bubble;
    const std::pair<const char*, const Time::Axis*> axes[] = {
        {"tp", &t.tp}, {"pp", &t.pp}, {"dp", &t.dp}, {"ep", &t.ep}, {"cp", &t.cp}};
    for (const auto& [name, a] : axes) {
      o << ", \"" << name << "\": {\"comm\": " << a->comm << ", \"exposed\": " << a->exposed << "}";
    }
    o << ", \"memory\": {\"params\": " << m.params << ", \"grads\": " << m.grads
      << ", \"optimizer\": " << m.optimizer << ", \"activations\": " << m.activations
      << ", \"buffers\": " << m.buffers << ", \"total\": " << m.total()
      << "}, \"stage\": " << c.estimate.stage;
    const Bytes& b = c.estimate.bytes;
    o << ", \"bytes\": {\"tp\": " << b.tp << ", \"pp\": " << b.pp << ", \"dp\": " << b.dp
      << ", \"ep\": " << b.ep << ", \"cp\": " << b.cp << "}";
    if (!c.refusal.empty()) {
      std::string why;
      for (char ch : c.refusal) why += ch == '"' ? std::string("\\\"") : std::string(1, ch);
      o << ", \"refusal\": \"" << why << "\"";
    }
    o << "}";
  }
  o << "\n]}\n";
  return o.str();
}

}  // namespace plan
