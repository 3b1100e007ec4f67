#include "validate/report_format.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>

namespace gpt::rep {

// ---- Numbers. std::to_chars ignores the locale, so the same Report gives the same bytes
// wherever it is written.

std::string chars(double v, std::chars_format f, int precision) {
  char b[64];
  const auto r = precision < 0 ? std::to_chars(b, b + sizeof b, v, f)
                               : std::to_chars(b, b + sizeof b, v, f, precision);
  return std::string(b, r.ptr);
}
std::string fixed(double v, int decimals) { return chars(v, std::chars_format::fixed, decimals); }
std::string general(double v, int digits) { return chars(v, std::chars_format::general, digits); }
// Byte counts as plain integers; anything else as the shortest text that reads back as v.
std::string exact(double v) {
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) return fixed(v, 0);
  char b[64];
  return std::string(b, std::to_chars(b, b + sizeof b, v).ptr);
}
// A loss exactly as the float it is.
std::string exact(float v) {
  char b[64];
  return std::string(b, std::to_chars(b, b + sizeof b, v).ptr);
}
std::string count_of(int n, const char* one, const char* many) {
  return std::to_string(n) + ' ' + (n == 1 ? one : many);
}

std::string percent(double v) { return fixed(100 * v, 1) + "%"; }
std::string gbs(double v) { return v >= 1 ? fixed(v, 1) : general(v, 2); }
std::string ms(double v) { return v < 100 ? fixed(v, 2) : fixed(v, 1); }
std::string rel_diff(double v) { return v == 0 ? "0" : chars(v, std::chars_format::scientific, 2); }

std::string size_text(double bytes) {
  static const std::pair<double, const char*> units[] = {
      {1024.0 * 1024 * 1024, " GiB"}, {1024.0 * 1024, " MiB"}, {1024.0, " KiB"}};
  for (const auto& [unit, name] : units)
    if (bytes >= unit) return general(bytes / unit, 4) + name;
  return exact(bytes) + " B";
}

std::string threshold_text(const ReportBandwidth& b) {
  if (!b.judged) return "not judged: " + b.why_not_judged;
  return ">= " + general(100 * b.threshold, 3) + "% of " + gbs(b.promise_gbs) + " GB/s";
}

std::string rank_set(const std::vector<int>& ranks) {
  std::string s = "{";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(ranks[i]);
  }
  return s + "}";
}

// Measured traffic equals its formula as validate compares them (the figures are sums of
// doubles); memory is compared exactly.
bool same(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(b)); }

bool stage_matches(const ReportStage& s) {
  return same(s.tp_bytes, s.tp_bytes_formula) && same(s.pp_bytes, s.pp_bytes_formula) &&
         same(s.ep_bus_bytes, s.ep_bus_bytes_formula) && same(s.cp_bytes, s.cp_bytes_formula) &&
         same(s.dp_bus_bytes, s.dp_bus_bytes_formula) && s.param_bytes == s.param_bytes_formula &&
         s.grad_bytes == s.grad_bytes_formula && s.optimizer_bytes == s.optimizer_bytes_formula;
}

double worst_bubble(const ReportLayout& l) {
  double w = 0;
  for (const ReportStage& s : l.stages) w = std::max(w, s.bubble);
  return w;
}

// ---- Escaping.

// A Markdown table cell (also safe in running text): '|' would end the cell, '<' could open an
// HTML tag GitHub swallows, a newline would end the row.
std::string md(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '|')
      o += "\\|";
    else if (c == '<')
      o += "&lt;";
    else if (c == '\n' || c == '\r')
      o += ' ';
    else
      o += c;
  }
  return o;
}

std::string xml(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&apos;";
        break;
      default:  // control characters are not allowed in XML 1.0 at all
        o += (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') ? ' ' : c;
    }
  }
  return o;
}

// A fence longer than any run of backticks inside `s`, so a command line shows verbatim.
std::string fence_for(const std::string& s) {
  size_t run = 0, longest = 0;
  for (char c : s) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  return std::string(std::max<size_t>(3, longest + 1), '`');
}

// ---- Verdicts.

// Why a layout failed, from the fields that say so; empty when it passed.
std::vector<std::string> failure_reasons(const ReportLayout& l, const Report& r) {
  const double tolerance = r.tolerance;
  std::vector<std::string> why;
  if (l.pass) return why;
  if (!(l.max_rel_diff <= tolerance))
    why.push_back("loss differs from the reference: max relative difference " +
                  rel_diff(l.max_rel_diff) + " > tolerance " + rel_diff(tolerance));
  if (!(l.grad_norm_rel_diff <= r.grad_norm_tolerance))
    why.push_back("gradient norm differs from the reference: max relative difference " +
                  rel_diff(l.grad_norm_rel_diff) + " > tolerance " +
                  rel_diff(r.grad_norm_tolerance));
  if (!l.replicas_identical) why.push_back("replicas are not bit-identical");
  if (!l.formulas_match) why.push_back("traffic or memory differs from its formula");
  for (const ReportBandwidth& b : l.bandwidth) {
    if (b.pass) continue;
    std::string s = "bandwidth: ";
    s += b.dim;
    s += ' ';
    s += b.collective;
    s += " on ranks ";
    s += rank_set(b.ranks);
    s += " reached ";
    s += gbs(b.busbw_gbs);
    s += " GB/s, needs ";
    s += threshold_text(b);
    s += " (";
    s += b.link_class;
    s += ')';
    why.push_back(s);
  }
  if (why.empty()) why.push_back("marked failed by the run");
  return why;
}

size_t failed_layouts(const Report& r) {
  return size_t(std::count_if(r.layouts.begin(), r.layouts.end(), [](auto& l) { return !l.pass; }));
}

bool report_passes(const Report& r) { return r.pass && failed_layouts(r) == 0; }

// The report's nodes, plus one for ranks no node lists (so every rank has a place).
std::vector<ReportNode> placed_nodes(const Report& r, const std::vector<int>& more) {
  std::vector<ReportNode> nodes = r.nodes;
  std::set<int> placed, missing;
  for (const ReportNode& n : nodes) placed.insert(n.ranks.begin(), n.ranks.end());
  for (int k = 0; k < r.ranks; ++k)
    if (!placed.count(k)) missing.insert(k);
  for (int k : more)
    if (!placed.count(k)) missing.insert(k);
  if (!missing.empty()) nodes.push_back({"(no node listed)", {missing.begin(), missing.end()}});
  return nodes;
}

}  // namespace gpt::rep
