// The certification report: README.md built section by section (summary, inventory, layouts,
// numerics, provenance) and the SVGs it shows, all as strings first, then written file by file.
#include "report.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace gpt {

namespace {

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
         s.param_bytes == s.param_bytes_formula && s.grad_bytes == s.grad_bytes_formula &&
         s.optimizer_bytes == s.optimizer_bytes_formula;
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
    if (c == '|') o += "\\|";
    else if (c == '<') o += "&lt;";
    else if (c == '\n' || c == '\r') o += ' ';
    else o += c;
  }
  return o;
}

std::string xml(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
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
std::vector<std::string> failure_reasons(const ReportLayout& l, double tolerance) {
  std::vector<std::string> why;
  if (l.pass) return why;
  if (!(l.max_rel_diff <= tolerance))
    why.push_back("loss differs from the reference: max relative difference " +
                  rel_diff(l.max_rel_diff) + " > tolerance " + rel_diff(tolerance));
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

// ---- SVG pieces. Coordinates at 0.1 px; sans-serif is the viewer's own font.

std::string px(double v) { return fixed(v, 1); }

const char* const kLine[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                             "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
const char* const kFill[] = {"#cfe2f3", "#fde0c5", "#d5efd0", "#f4cccc",
                             "#e1d5f0", "#fff2cc", "#d0e0e3", "#ead1dc"};
const char* line_colour(size_t i) { return kLine[i % std::size(kLine)]; }
const char* stage_fill(size_t i) { return kFill[i % std::size(kFill)]; }

std::string svg_open(double w, double h, const std::string& title) {
  std::string s = "<svg xmlns='http://www.w3.org/2000/svg' width='" + px(w) + "' height='" + px(h);
  s += "' viewBox='0 0 " + px(w) + ' ' + px(h);
  s += "' font-family='sans-serif' font-size='12'>\n<title>" + xml(title) + "</title>\n";
  s += "<rect width='100%' height='100%' fill='white'/>\n";
  s += "<text x='16' y='24' font-size='15' font-weight='bold'>" + xml(title) + "</text>\n";
  return s;
}

std::string text(double x, double y, const std::string& s, const std::string& attrs = "") {
  std::string o = "<text x='" + px(x) + "' y='" + px(y) + '\'';
  if (!attrs.empty()) o += ' ' + attrs;
  return o + '>' + xml(s) + "</text>\n";
}

std::string rect(double x, double y, double w, double h, const std::string& attrs) {
  return "<rect x='" + px(x) + "' y='" + px(y) + "' width='" + px(w) + "' height='" + px(h) +
         "' " + attrs + "/>\n";
}

std::string line(double x1, double y1, double x2, double y2, const std::string& attrs) {
  return "<line x1='" + px(x1) + "' y1='" + px(y1) + "' x2='" + px(x2) + "' y2='" + px(y2) +
         "' " + attrs + "/>\n";
}

// A round step giving about five grid lines over `range`.
double nice_step(double range) {
  const double raw = range / 5, mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

// ---- Nodes as boxes holding their ranks (the inventory and every mesh).

constexpr double kMargin = 16, kCellW = 60, kCellH = 40, kGap = 14, kPad = 12, kHead = 24;
constexpr size_t kCols = 8;

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

struct Boxes {
  std::string svg;
  std::map<int, std::pair<double, double>> cell;  // rank -> top-left of its first cell
  double width = 0, bottom = 0;
};

template <class Fill, class Sub>
Boxes draw_nodes(const std::vector<ReportNode>& nodes, double top, Fill fill, Sub sub) {
  size_t cols = 1;
  for (const ReportNode& n : nodes) cols = std::max(cols, std::min(kCols, n.ranks.size()));
  Boxes b;
  b.width = 2 * kPad + cols * kCellW + (cols - 1) * kGap;
  double y = top;
  for (const ReportNode& n : nodes) {
    const size_t rows = std::max<size_t>(1, (n.ranks.size() + cols - 1) / cols);
    const double h = kHead + rows * (kCellH + kGap) - kGap + kPad;
    b.svg += rect(kMargin, y, b.width, h, "rx='6' fill='#f7f7f7' stroke='#888'");
    b.svg += text(kMargin + kPad, y + 17,
                  n.name + " (" + count_of(int(n.ranks.size()), "rank", "ranks") + ")",
                  "font-weight='bold'");
    for (size_t i = 0; i < n.ranks.size(); ++i) {
      const int k = n.ranks[i];
      const double x = kMargin + kPad + (i % cols) * (kCellW + kGap);
      const double cy = y + kHead + (i / cols) * (kCellH + kGap);
      b.cell.emplace(k, std::make_pair(x, cy));
      b.svg += "<g>";
      b.svg += "<title>rank " + std::to_string(k) + " on " + xml(n.name) + "</title>";
      b.svg += rect(x, cy, kCellW, kCellH, "rx='3' fill='" + std::string(fill(k)) + "' stroke='#555'");
      const std::string s = sub(k);
      b.svg += text(x + kCellW / 2, cy + (s.empty() ? 25 : 18), std::to_string(k),
                    "text-anchor='middle' font-size='14' font-weight='bold'");
      if (!s.empty())
        b.svg += text(x + kCellW / 2, cy + 33, s, "text-anchor='middle' font-size='10'");
      b.svg += "</g>\n";
    }
    y += h + kGap;
  }
  b.bottom = y;
  return b;
}

std::string inventory_svg(const Report& r) {
  const std::vector<ReportNode> nodes = placed_nodes(r, {});
  size_t ranks = 0;
  for (const ReportNode& n : nodes) ranks += n.ranks.size();
  const std::string title = "Inventory: " + count_of(int(r.nodes.size()), "node", "nodes") +
                            ", " + count_of(int(ranks), "rank", "ranks");
  Boxes b = draw_nodes(nodes, 40, [](int) { return "white"; }, [](int) { return std::string(); });
  double y = b.bottom + 8;
  std::string links;
  links += text(kMargin, y, "Link classes (topology estimate per rank pair)", "font-weight='bold'");
  for (const ReportLink& l : r.links) {
    y += 18;
    links += text(kMargin, y,
                  l.cls + ": " + gbs(l.bandwidth_gbs) + " GB/s, " + general(l.latency_us, 3) +
                      " us, " + std::to_string(l.pairs) + " pairs, e.g. ranks " +
                      std::to_string(l.example_a) + "-" + std::to_string(l.example_b));
  }
  const double w = std::max(b.width + 2 * kMargin, 520.0);
  return svg_open(w, y + 16, title) + b.svg + links + "</svg>\n";
}

const ReportGroup* find_dim(const ReportLayout& l, const std::string& dim) {
  for (const ReportGroup& g : l.groups)
    if (g.dim == dim) return &g;
  return nullptr;
}

// Ranks per node, shaded by pipeline stage, each tp group outlined in its own colour.
std::string mesh_svg(const Report& r, const ReportLayout& l) {
  std::map<int, int> stage;  // the rank of stage s is pp_group[s]
  if (const ReportGroup* pp = find_dim(l, "pp"))
    for (const auto& g : pp->groups)
      for (size_t s = 0; s < g.size(); ++s) stage[g[s]] = int(s);
  std::vector<int> used;
  for (const ReportGroup& d : l.groups)
    for (const auto& g : d.groups) used.insert(used.end(), g.begin(), g.end());
  const auto stage_of = [&](int k) { auto it = stage.find(k); return it == stage.end() ? 0 : it->second; };
  const bool staged = l.pp > 1 || !stage.empty();
  const std::string title = l.name + ": tp " + std::to_string(l.tp) + " x pp " +
                            std::to_string(l.pp) + " x dp " + std::to_string(l.dp);
  Boxes b = draw_nodes(
      placed_nodes(r, used), 40, [&](int k) { return stage_fill(stage_of(k)); },
      [&](int k) { return staged ? "stage " + std::to_string(stage_of(k)) : std::string(); });

  // Each tp group: one outline per run of neighbouring cells (a group spanning rows or nodes
  // gets several outlines of the same colour).
  std::string outlines;
  size_t colour = 0;
  if (const ReportGroup* tp = find_dim(l, "tp"))
    for (const auto& g : tp->groups) {
      if (g.size() < 2) continue;
      std::vector<std::pair<double, double>> at;
      for (int k : g)
        if (b.cell.count(k)) at.push_back(b.cell.at(k));
      std::sort(at.begin(), at.end(), [](auto& a, auto& c) {
        return a.second != c.second ? a.second < c.second : a.first < c.first;
      });
      const std::string stroke =
          std::string("fill='none' stroke-width='2.5' rx='7' stroke='") + line_colour(colour++) + "'";
      for (size_t i = 0; i < at.size();) {
        size_t j = i + 1;
        while (j < at.size() && at[j].second == at[i].second &&
               std::fabs(at[j].first - at[j - 1].first - (kCellW + kGap)) < 0.5)
          ++j;
        const double x0 = at[i].first - 4, x1 = at[j - 1].first + kCellW + 4;
        outlines += rect(x0, at[i].second - 4, x1 - x0, kCellH + 8, stroke);
        i = j;
      }
    }

  double y = b.bottom + 8;
  std::string legend;
  double x = kMargin;
  if (staged)
    for (int s = 0; s < std::max(1, l.pp); ++s) {
      legend += rect(x, y - 10, 14, 14, "fill='" + std::string(stage_fill(s)) + "' stroke='#555'");
      legend += text(x + 18, y + 1, "stage " + std::to_string(s));
      x += 80;
    }
  if (!outlines.empty()) legend += text(x, y + 1, "outline: one tp group");
  y += 22;
  legend += text(kMargin, y,
                 "ZeRO stage " + std::to_string(l.zero_stage) + ", " +
                     count_of(l.micro_batches, "micro-batch", "micro-batches") + (l.sp ? ", sequence parallel" : "") +
                     (l.schedule.empty() ? "" : ", " + l.schedule + " schedule"),
                 "fill='#444'");
  const double w = std::max({b.width + 2 * kMargin, x + 160, 420.0});
  return svg_open(w, y + 14, title) + b.svg + outlines + legend + "</svg>\n";
}

// ---- The loss curves: the reference thick and pale, every layout dashed over it.

std::string polylines(const std::vector<float>& v, double x0, double x1, double y0, double y1,
                      double left, double top, double w, double h, const std::string& attrs) {
  auto X = [&](double s) { return left + (s - x0) / (x1 - x0) * w; };
  auto Y = [&](double l) { return top + h - (l - y0) / (y1 - y0) * h; };
  std::string o, pts;
  auto flush = [&] {
    if (!pts.empty()) o += "<polyline fill='none' " + attrs + " points='" + pts + "'/>\n";
    pts.clear();
  };
  for (size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i])) {  // a diverged layout: break the line, keep the rest
      flush();
      continue;
    }
    if (!pts.empty()) pts += ' ';
    pts += px(X(double(i + 1))) + ',' + px(Y(v[i]));
  }
  flush();
  return o;
}

std::string losses_svg(const Report& r) {
  constexpr double left = 64, top = 44, pw = 600, ph = 320;
  size_t steps = r.reference_losses.size();
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  auto scan = [&](const std::vector<float>& v) {
    steps = std::max(steps, v.size());
    for (float f : v)
      if (std::isfinite(f)) lo = std::min(lo, double(f)), hi = std::max(hi, double(f));
  };
  scan(r.reference_losses);
  for (const ReportLayout& l : r.layouts) scan(l.losses);
  if (lo > hi) lo = 0, hi = 1;
  if (hi - lo < 1e-6 * std::max(1.0, std::fabs(hi))) lo -= 0.5, hi += 0.5;
  const double ys = nice_step(hi - lo);
  const double y0 = std::floor(lo / ys) * ys, y1 = std::ceil(hi / ys) * ys;
  const double x0 = 1, x1 = std::max<double>(2, steps);
  const int decimals = std::max(0, int(-std::floor(std::log10(ys))));

  size_t longest = 18;  // "reference (1 rank)"
  for (const ReportLayout& l : r.layouts) longest = std::max(longest, l.name.size());
  const double height = std::max(top + ph + 50, top + 18.0 * (r.layouts.size() + 2));
  std::string o = svg_open(left + pw + 80 + 7 * longest, height,
                           "Loss per step: reference and every layout");
  for (int i = 0, n = int(std::lround((y1 - y0) / ys)); i <= n; ++i) {
    const double v = y0 + i * ys, y = top + ph - (v - y0) / (y1 - y0) * ph;
    o += line(left, y, left + pw, y, "stroke='#ddd'");
    o += text(left - 6, y + 4, fixed(v, decimals), "text-anchor='end'");
  }
  // Step 1, then round multiples of a round step (whole numbers: exact in a double).
  const double xs = std::max(1.0, std::round(nice_step(x1 - x0)));
  for (double s = x0; s <= x1 + 0.5; s = (std::floor(s / xs) + 1) * xs) {
    const double x = left + (s - x0) / (x1 - x0) * pw;
    o += line(x, top + ph, x, top + ph + 5, "stroke='#888'");
    o += text(x, top + ph + 18, fixed(s, 0), "text-anchor='middle'");
  }
  o += rect(left, top, pw, ph, "fill='none' stroke='#888'");
  o += text(left + pw / 2, top + ph + 38, "step", "text-anchor='middle'");
  o += text(16, top + ph / 2, "loss", "text-anchor='middle' transform='rotate(-90 16 " +
                                          px(top + ph / 2) + ")'");
  o += polylines(r.reference_losses, x0, x1, y0, y1, left, top, pw, ph,
                 "stroke='#000' stroke-opacity='0.35' stroke-width='5'");
  for (size_t i = 0; i < r.layouts.size(); ++i)
    o += polylines(r.layouts[i].losses, x0, x1, y0, y1, left, top, pw, ph,
                   std::string("stroke='") + line_colour(i) + "' stroke-width='1.5' stroke-dasharray='6 3'");
  // Legend, one row per curve.
  const double lx = left + pw + 20;
  double ly = top + 6;
  o += line(lx, ly, lx + 28, ly, "stroke='#000' stroke-opacity='0.35' stroke-width='5'");
  o += text(lx + 36, ly + 4, "reference (1 rank)");
  for (size_t i = 0; i < r.layouts.size(); ++i) {
    ly += 18;
    o += line(lx, ly, lx + 28, ly,
              std::string("stroke='") + line_colour(i) + "' stroke-width='1.5' stroke-dasharray='6 3'");
    o += text(lx + 36, ly + 4, r.layouts[i].name);
  }
  return o + "</svg>\n";
}

// ---- Bubble per layout per stage, the schedule's ideal as a black tick on each bar.

std::string bubble_svg(const Report& r) {
  constexpr double left = 64, top = 64, ph = 260, bw = 16, group_gap = 28;
  double hi = 0;
  size_t longest = 0, stages = 1;
  double pw = group_gap;
  for (const ReportLayout& l : r.layouts) {
    for (const ReportStage& s : l.stages) hi = std::max({hi, s.bubble, s.ideal_bubble});
    longest = std::max(longest, l.name.size());
    stages = std::max(stages, l.stages.size());
    pw += std::max<size_t>(1, l.stages.size()) * bw + group_gap;
  }
  const double ymax = std::max(0.1, std::ceil(hi * 10 - 1e-9) / 10);  // 10% steps
  const double bottom = 30 + std::min(300.0, 4.0 * longest);            // rotated names
  // Few layouts: widen the gaps rather than leave the right side empty.
  const double min_pw = std::max(440.0, 80.0 * (stages + 1));
  const double gap = group_gap + (pw < min_pw ? (min_pw - pw) / (r.layouts.size() + 1) : 0);
  pw = std::max(pw, min_pw);
  const double width = left + pw + 20;
  std::string o = svg_open(width, top + ph + bottom, "Pipeline bubble per stage (bar) vs ideal (tick)");
  // Legend row under the title.
  double x = left;
  for (size_t s = 0; s < stages; ++s) {
    o += rect(x, 34, 14, 14, "fill='" + std::string(stage_fill(s)) + "' stroke='#555'");
    o += text(x + 18, 45, "stage " + std::to_string(s));
    x += 80;
  }
  o += line(x, 41, x + 20, 41, "stroke='#000' stroke-width='3'");
  o += text(x + 26, 45, "ideal");

  const double step = ymax / 5;
  for (int i = 0; i <= 5; ++i) {
    const double y = top + ph - i * step / ymax * ph;
    o += line(left, y, left + pw, y, "stroke='#ddd'");
    o += text(left - 6, y + 4, fixed(100 * i * step, 0) + "%", "text-anchor='end'");
  }
  auto Y = [&](double v) { return top + ph - std::clamp(v, 0.0, ymax) / ymax * ph; };
  x = left + gap;
  for (const ReportLayout& l : r.layouts) {
    const double gw = std::max<size_t>(1, l.stages.size()) * bw;
    for (size_t i = 0; i < l.stages.size(); ++i) {
      const ReportStage& s = l.stages[i];
      const double bx = x + i * bw;
      o += "<g><title>" + xml(l.name) + " stage " + std::to_string(s.stage) + ": bubble " +
           percent(s.bubble) + ", ideal " + percent(s.ideal_bubble) + "</title>";
      o += rect(bx + 1, Y(s.bubble), bw - 2, top + ph - Y(s.bubble),
                "fill='" + std::string(stage_fill(size_t(std::max(0, s.stage)))) + "' stroke='#555'");
      o += line(bx - 1, Y(s.ideal_bubble), bx + bw + 1, Y(s.ideal_bubble),
                "stroke='#000' stroke-width='3'");
      o += "</g>\n";
    }
    const double cx = x + gw / 2, ty = top + ph + 14;
    o += text(cx, ty, l.name,
              "text-anchor='end' font-size='11' transform='rotate(-35 " + px(cx) + ' ' + px(ty) + ")'");
    x += gw + gap;
  }
  o += line(left, top + ph, left + pw, top + ph, "stroke='#888'");
  if (r.layouts.empty()) o += text(left + 20, top + ph / 2, "no layouts");
  return o + "</svg>\n";
}

// ---- Markdown.

const char* yes_no(bool b) { return b ? "yes" : "**no**"; }
const char* result(bool pass) { return pass ? "pass" : "**FAIL**"; }

// A measured byte count next to its formula: equal ones plain, different ones bold.
std::string measured(double v, bool equal) { return equal ? exact(v) : "**" + exact(v) + "**"; }

std::string summary_md(const Report& r) {
  const size_t failed = failed_layouts(r);
  std::string o = "# " + md(r.title) + "\n\n";
  if (report_passes(r)) {
    o += "**PASS**: all " + std::to_string(r.layouts.size()) +
         " layouts passed: losses within " + rel_diff(r.tolerance) +
         " of one rank's, replicas bit-identical, traffic and memory equal to their formulas, "
         "bandwidth as the topology promises.\n\n";
  } else {
    o += "**FAIL**: " + std::to_string(failed) + " of " + std::to_string(r.layouts.size()) +
         " layouts failed";
    if (failed == 0) o += " (the run itself was marked failed)";
    o += ".\n\n";
    for (const ReportLayout& l : r.layouts) {
      const std::vector<std::string> why = failure_reasons(l, r.tolerance);
      if (why.empty()) continue;
      o += "- **" + md(l.name) + "**: ";
      for (size_t i = 0; i < why.size(); ++i) o += (i ? "; " : "") + md(why[i]);
      o += "\n";
    }
    o += "\n";
  }
  if (!r.model.empty()) o += md(r.model) + "; ";
  o += std::to_string(r.ranks) + " ranks, " + std::to_string(r.steps) + " steps, global batch " +
       std::to_string(r.global_batch) + ".\n\n## Summary\n\n";
  o += "Each layout trains the same steps from the same initialisation as one rank alone "
       "(the reference) and must give its losses.\n\n";
  o += "| layout | result | max rel. loss diff | bit-identical | replicas identical | step ms | "
       "worst bubble | traffic/memory = formula |\n";
  o += "|---|---|--:|---|---|--:|--:|---|\n";
  o += "| reference (1 rank) | - | - | - | - | " + ms(r.reference_step_ms) + " | - | - |\n";
  for (const ReportLayout& l : r.layouts) {
    o += "| " + md(l.name) + " | " + result(l.pass) + " | " + rel_diff(l.max_rel_diff) + " | " +
         (l.bit_identical ? "yes" : "no") + " | " + yes_no(l.replicas_identical) + " | " +
         ms(l.step_ms) + " | " + (l.stages.empty() ? "-" : percent(worst_bubble(l))) + " | " +
         yes_no(l.formulas_match) + " |\n";
  }
  return o + "\n";
}

std::string inventory_md(const Report& r) {
  std::string o = "## Inventory\n\n| node | ranks |\n|---|---|\n";
  for (const ReportNode& n : placed_nodes(r, {})) o += "| " + md(n.name) + " | " + rank_set(n.ranks) + " |\n";
  o += "\nLink classes between rank pairs, with the topology's estimate for each:\n\n";
  o += "| class | GB/s | latency us | example pair | pairs |\n|---|--:|--:|---|--:|\n";
  for (const ReportLink& l : r.links)
    o += "| " + md(l.cls) + " | " + gbs(l.bandwidth_gbs) + " | " + general(l.latency_us, 3) +
         " | " + std::to_string(l.example_a) + " - " + std::to_string(l.example_b) + " | " +
         std::to_string(l.pairs) + " |\n";
  if (r.links.empty()) o += "| (none reported) | - | - | - | - |\n";
  return o + "\n![inventory](inventory.svg)\n\n";
}

std::string layout_md(const Report& r, const ReportLayout& l, size_t index, const std::string& svg) {
  std::string o = "### " + std::to_string(index + 1) + ". " + md(l.name) + ": " +
                  (l.pass ? "pass" : "FAIL") + "\n\n";
  o += "tp " + std::to_string(l.tp) + (l.sp ? " (sequence parallel)" : "") + ", pp " +
       std::to_string(l.pp);
  if (!l.schedule.empty())
    o += " (" + md(l.schedule) + " schedule, " + count_of(l.virtual_stages, "virtual stage", "virtual stages") +
         " per rank)";
  o += ", dp " + std::to_string(l.dp) + ", ZeRO stage " + std::to_string(l.zero_stage) + ", " +
       count_of(l.micro_batches, "micro-batch", "micro-batches") + ".\n\n";
  for (const std::string& why : failure_reasons(l, r.tolerance)) o += "- fails: " + md(why) + "\n";
  if (!l.pass) o += "\n";

  o += "Mesh: every group's world ranks.\n\n| dim | groups | ranks |\n|---|--:|---|\n";
  for (const ReportGroup& d : l.groups) {
    o += "| " + md(d.dim) + " | " + std::to_string(d.groups.size()) + " |";
    for (const auto& g : d.groups) o += ' ' + rank_set(g);
    o += " |\n";
  }
  o += "\n![mesh of " + md(l.name) + "](" + svg + ")\n\n";

  o += "Bandwidth probes (bus bandwidth in the nccl-tests sense):\n\n";
  o += "| dim | group | collective | size | busbw GB/s | link class | promise GB/s | threshold | "
       "result |\n|---|---|---|--:|--:|---|--:|---|---|\n";
  for (const ReportBandwidth& b : l.bandwidth)
    o += "| " + md(b.dim) + " | " + rank_set(b.ranks) + " | " + md(b.collective) + " | " +
         size_text(b.bytes) + " | " + gbs(b.busbw_gbs) + " | " + md(b.link_class) + " | " +
         gbs(b.promise_gbs) + " | " + threshold_text(b) + " | " + result(b.pass) + " |\n";
  if (l.bandwidth.empty()) o += "| - | - | - | - | - | - | - | - | - |\n";

  o += "\nPer stage, one step: pipeline bubble and traffic in bytes, measured next to the "
       "formula (a different figure is bold).\n\n";
  o += "| stage | bubble | ideal | tp bytes | formula | pp bytes | formula | dp bus bytes |\n";
  o += "|--:|--:|--:|--:|--:|--:|--:|--:|\n";
  for (const ReportStage& s : l.stages)
    o += "| " + std::to_string(s.stage) + " | " + percent(s.bubble) + " | " +
         percent(s.ideal_bubble) + " | " + measured(s.tp_bytes, same(s.tp_bytes, s.tp_bytes_formula)) +
         " | " + exact(s.tp_bytes_formula) + " | " +
         measured(s.pp_bytes, same(s.pp_bytes, s.pp_bytes_formula)) + " | " +
         exact(s.pp_bytes_formula) + " | " + exact(s.dp_bus_bytes) + " |\n";
  o += "\nPer stage, memory of one rank in bytes (exact), measured next to the formula:\n\n";
  o += "| stage | params | formula | grads | formula | optimizer | formula | activations (peak) | "
       "= formula |\n|--:|--:|--:|--:|--:|--:|--:|--:|---|\n";
  for (const ReportStage& s : l.stages) {
    auto cell = [](size_t m, size_t f) {
      return measured(double(m), m == f) + " | " + std::to_string(f);
    };
    o += "| " + std::to_string(s.stage) + " | " + cell(s.param_bytes, s.param_bytes_formula) +
         " | " + cell(s.grad_bytes, s.grad_bytes_formula) + " | " +
         cell(s.optimizer_bytes, s.optimizer_bytes_formula) + " | " +
         std::to_string(s.activation_bytes) + " | " + yes_no(stage_matches(s)) + " |\n";
  }
  return o + "\n";
}

std::string numerics_md(const Report& r) {
  std::string o = "## Numerics\n\n";
  o += "Tolerance: max over steps of |loss - reference| / reference <= " + rel_diff(r.tolerance) +
       ".\n\n| layout | max rel. diff | within tolerance | bit-identical | replicas identical | "
       "final loss | result |\n|---|--:|---|---|---|--:|---|\n";
  auto final_loss = [](const std::vector<float>& v) {
    return v.empty() ? std::string("-") : exact(v.back());
  };
  o += "| reference (1 rank) | - | - | - | - | " + final_loss(r.reference_losses) + " | - |\n";
  for (const ReportLayout& l : r.layouts)
    o += "| " + md(l.name) + " | " + rel_diff(l.max_rel_diff) + " | " +
         yes_no(l.max_rel_diff <= r.tolerance) + " | " + (l.bit_identical ? "yes" : "no") + " | " +
         yes_no(l.replicas_identical) + " | " + final_loss(l.losses) + " | " + result(l.pass) +
         " |\n";
  o += "\nThe curves should lie on one another:\n\n![losses](losses.svg)\n\n";
  o += "Pipeline bubble per layout and stage against the schedule's ideal:\n\n"
       "![bubble](bubble.svg)\n\n";
  return o;
}

std::string provenance_md(const Report& r) {
  std::string o = "## Provenance\n\n| | |\n|---|---|\n";
  const std::pair<const char*, std::string> rows[] = {
      {"Strata version", r.strata_version}, {"commit", r.commit},
      {"compiler", r.compiler},             {"date (UTC)", r.date_utc},
      {"seed", std::to_string(r.seed)},     {"tolerance", rel_diff(r.tolerance)},
      {"model", r.model},                   {"ranks", std::to_string(r.ranks)},
      {"steps", std::to_string(r.steps)},   {"global batch", std::to_string(r.global_batch)}};
  for (const auto& [k, v] : rows) o += std::string("| ") + k + " | " + md(v) + " |\n";
  const std::string fence = fence_for(r.command_line);
  return o + "\nCommand line:\n\n" + fence + "\n" + r.command_line + "\n" + fence + "\n";
}

// ---- Files.

std::string file_safe(const std::string& s) {
  std::string o;
  for (char c : s.substr(0, 60)) o += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ? c : '_';
  return o;
}

// Through a temporary and a rename, so a reader never sees half a file.
void write_file(const std::filesystem::path& path, const std::string& content) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (f) f << content;
    if (f) f.close();
    if (!f) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      throw std::runtime_error("report: cannot write " + path.string());
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw std::runtime_error("report: cannot write " + path.string() + ": " + ec.message());
  }
}

}  // namespace

std::vector<std::string> write_report(const std::string& dir, const Report& r) {
  if (dir.empty()) throw std::runtime_error("report: empty directory name");
  const std::filesystem::path root(dir);
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec) throw std::runtime_error("report: cannot create " + dir + ": " + ec.message());

  std::vector<std::string> written;
  auto put = [&](const std::string& name, const std::string& content) {
    write_file(root / name, content);
    written.push_back((root / name).string());
  };
  const int digits = std::max<int>(2, std::to_string(r.layouts.size()).size());
  std::string layouts_md = "## Layouts\n\n";
  for (size_t i = 0; i < r.layouts.size(); ++i) {
    std::string n = std::to_string(i + 1);
    n.insert(0, digits - n.size(), '0');
    const std::string svg = "mesh-" + n + "-" + file_safe(r.layouts[i].name) + ".svg";
    put(svg, mesh_svg(r, r.layouts[i]));
    layouts_md += layout_md(r, r.layouts[i], i, svg);
  }
  put("inventory.svg", inventory_svg(r));
  put("losses.svg", losses_svg(r));
  put("bubble.svg", bubble_svg(r));
  put("README.md", summary_md(r) + inventory_md(r) + layouts_md + numerics_md(r) + provenance_md(r));
  return written;
}

}  // namespace gpt
