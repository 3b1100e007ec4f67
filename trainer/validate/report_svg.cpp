#include "validate/report_svg.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <set>

#include "validate/report_format.hpp"

namespace gpt::rep {

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
  return "<rect x='" + px(x) + "' y='" + px(y) + "' width='" + px(w) + "' height='" + px(h) + "' " +
         attrs + "/>\n";
}

std::string line(double x1, double y1, double x2, double y2, const std::string& attrs) {
  return "<line x1='" + px(x1) + "' y1='" + px(y1) + "' x2='" + px(x2) + "' y2='" + px(y2) + "' " +
         attrs + "/>\n";
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
      b.svg +=
          rect(x, cy, kCellW, kCellH, "rx='3' fill='" + std::string(fill(k)) + "' stroke='#555'");
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
  const std::string title = "Inventory: " + count_of(int(r.nodes.size()), "node", "nodes") + ", " +
                            count_of(int(ranks), "rank", "ranks");
  Boxes b = draw_nodes(
      nodes, 40, [](int) { return "white"; }, [](int) { return std::string(); });
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
  const auto stage_of = [&](int k) {
    auto it = stage.find(k);
    return it == stage.end() ? 0 : it->second;
  };
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
      const std::string stroke = std::string("fill='none' stroke-width='2.5' rx='7' stroke='") +
                                 line_colour(colour++) + "'";
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
                     count_of(l.micro_batches, "micro-batch", "micro-batches") +
                     (l.sp ? ", sequence parallel" : "") +
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
  std::string o =
      svg_open(left + pw + 80 + 7 * longest, height, "Loss per step: reference and every layout");
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
  o += text(16, top + ph / 2, "loss",
            "text-anchor='middle' transform='rotate(-90 16 " + px(top + ph / 2) + ")'");
  o += polylines(r.reference_losses, x0, x1, y0, y1, left, top, pw, ph,
                 "stroke='#000' stroke-opacity='0.35' stroke-width='5'");
  for (size_t i = 0; i < r.layouts.size(); ++i)
    o += polylines(
        r.layouts[i].losses, x0, x1, y0, y1, left, top, pw, ph,
        std::string("stroke='") + line_colour(i) + "' stroke-width='1.5' stroke-dasharray='6 3'");
  // Legend, one row per curve.
  const double lx = left + pw + 20;
  double ly = top + 6;
  o += line(lx, ly, lx + 28, ly, "stroke='#000' stroke-opacity='0.35' stroke-width='5'");
  o += text(lx + 36, ly + 4, "reference (1 rank)");
  for (size_t i = 0; i < r.layouts.size(); ++i) {
    ly += 18;
    o += line(
        lx, ly, lx + 28, ly,
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
  const double bottom = 30 + std::min(300.0, 4.0 * longest);          // rotated names
  // Few layouts: widen the gaps rather than leave the right side empty.
  const double min_pw = std::max(440.0, 80.0 * (stages + 1));
  const double gap = group_gap + (pw < min_pw ? (min_pw - pw) / (r.layouts.size() + 1) : 0);
  pw = std::max(pw, min_pw);
  const double width = left + pw + 20;
  std::string o =
      svg_open(width, top + ph + bottom, "Pipeline bubble per stage (bar) vs ideal (tick)");
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
      o += rect(
          bx + 1, Y(s.bubble), bw - 2, top + ph - Y(s.bubble),
          "fill='" + std::string(stage_fill(size_t(std::max(0, s.stage)))) + "' stroke='#555'");
      o += line(bx - 1, Y(s.ideal_bubble), bx + bw + 1, Y(s.ideal_bubble),
                "stroke='#000' stroke-width='3'");
      o += "</g>\n";
    }
    const double cx = x + gw / 2, ty = top + ph + 14;
    o += text(
        cx, ty, l.name,
        "text-anchor='end' font-size='11' transform='rotate(-35 " + px(cx) + ' ' + px(ty) + ")'");
    x += gw + gap;
  }
  o += line(left, top + ph, left + pw, top + ph, "stroke='#888'");
  if (r.layouts.empty()) o += text(left + 20, top + ph / 2, "no layouts");
  return o + "</svg>\n";
}

}  // namespace gpt::rep
