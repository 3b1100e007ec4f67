#include "perf_plot.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace perf {
namespace {

std::string human(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (bytes >= 1024 && u < 3) bytes /= 1024, ++u;
  std::ostringstream s;
  s << bytes << " " << units[u];
  return s.str();
}

struct Series {
  std::string name, color;
  std::vector<std::pair<double, double>> points;  // (bytes, busbw)
};

}  // namespace

bool write_plot(const std::string& path, const std::string& title, const std::vector<Row>& rows) {
  std::vector<Series> series = {{"Strata out-of-place", "#1f77b4", {}},
                                {"Strata in-place", "#2ca02c", {}},
                                {"Open MPI", "#d62728", {}}};
  for (const auto& r : rows) {
    if (r.out_of_place.available)
      series[0].points.push_back({double(r.bytes), r.out_of_place.busbw});
    if (r.in_place.available) series[1].points.push_back({double(r.bytes), r.in_place.busbw});
    if (r.mpi_busbw) series[2].points.push_back({double(r.bytes), *r.mpi_busbw});
  }
  double xmin = 1e300, xmax = 0, ymax = 0;
  for (auto& s : series) {
    for (auto [x, y] : s.points)
      xmin = std::min(xmin, x), xmax = std::max(xmax, x), ymax = std::max(ymax, y);
  }
  if (xmax == 0) return false;
  if (xmax <= xmin) xmax = xmin * 2;
  ymax = ymax > 0 ? ymax * 1.1 : 1;
  const double W = 860, H = 520, L = 80, R = 200, T = 50, B = 70;
  auto px = [&](double x) {
    return L + (std::log2(x) - std::log2(xmin)) / (std::log2(xmax) - std::log2(xmin)) * (W - L - R);
  };
  auto py = [&](double y) { return H - B - y / ymax * (H - T - B); };
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
    << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' "
       "fill='white'/>\n";
  o << "<text x='" << W / 2 << "' y='28' text-anchor='middle' font-size='16'>" << title
    << "</text>\n";
  // Axes, grid and ticks: sizes at every power of 4 bytes, bandwidth in 6 steps.
  o << "<line x1='" << L << "' y1='" << H - B << "' x2='" << W - R << "' y2='" << H - B
    << "' stroke='black'/>\n";
  o << "<line x1='" << L << "' y1='" << T << "' x2='" << L << "' y2='" << H - B
    << "' stroke='black'/>\n";
  for (double x = std::pow(4, std::ceil(std::log(xmin) / std::log(4))); x <= xmax * 1.0001;
       x *= 4) {
    o << "<line x1='" << px(x) << "' y1='" << T << "' x2='" << px(x) << "' y2='" << H - B
      << "' stroke='#eee'/>\n";
    o << "<text x='" << px(x) << "' y='" << H - B + 18 << "' text-anchor='middle'>" << human(x)
      << "</text>\n";
  }
  for (int i = 0; i <= 6; ++i) {
    double y = ymax * i / 6;
    o << "<line x1='" << L << "' y1='" << py(y) << "' x2='" << W - R << "' y2='" << py(y)
      << "' stroke='#eee'/>\n";
    o << "<text x='" << L - 8 << "' y='" << py(y) + 4 << "' text-anchor='end'>"
      << std::round(y * 100) / 100 << "</text>\n";
  }
  o << "<text x='" << (L + W - R) / 2 << "' y='" << H - 20
    << "' text-anchor='middle'>message size</text>\n";
  o << "<text transform='translate(22," << (T + H - B) / 2
    << ") rotate(-90)' text-anchor='middle'>bus bandwidth (GB/s)</text>\n";
  int legend = 0;
  for (auto& s : series) {
    if (s.points.empty()) continue;
    o << "<polyline fill='none' stroke-width='2' stroke='" << s.color << "' points='";
    for (auto [x, y] : s.points) o << px(x) << "," << py(y) << " ";
    o << "'/>\n";
    for (auto [x, y] : s.points)
      o << "<circle cx='" << px(x) << "' cy='" << py(y) << "' r='3' fill='" << s.color << "'/>\n";
    double ly = T + 20 + 22 * legend++;
    o << "<line x1='" << W - R + 15 << "' y1='" << ly << "' x2='" << W - R + 40 << "' y2='" << ly
      << "' stroke-width='3' stroke='" << s.color << "'/>\n";
    o << "<text x='" << W - R + 46 << "' y='" << ly + 4 << "'>" << s.name << "</text>\n";
  }
  o << "</svg>\n";
  std::ofstream f(path);
  f << o.str();
  return bool(f);
}

}  // namespace perf
