#include "validate/loss_plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace gpt {

namespace {

constexpr double kW = 720, kH = 420, kLeft = 60, kRight = 20, kTop = 40, kBottom = 50;

std::string polyline(const std::vector<std::pair<int, float>>& pts, double x0, double x1, double y0,
                     double y1, const char* colour, bool dots) {
  auto X = [&](double s) {
    return kLeft + (s - x0) / std::max(1e-9, x1 - x0) * (kW - kLeft - kRight);
  };
  auto Y = [&](double l) {
    return kH - kBottom - (l - y0) / std::max(1e-9, y1 - y0) * (kH - kTop - kBottom);
  };
  std::ostringstream o;
  o.precision(5);
  if (dots) {
    for (auto& [s, l] : pts)
      o << "<circle cx='" << X(s) << "' cy='" << Y(l) << "' r='3.5' fill='" << colour << "'/>\n";
    return o.str();
  }
  o << "<polyline fill='none' stroke='" << colour << "' stroke-width='1.5' points='";
  for (auto& [s, l] : pts) o << X(s) << ',' << Y(l) << ' ';
  o << "'/>\n";
  return o.str();
}

}  // namespace

bool write_loss_plot(const std::string& path, const std::string& title,
                     const std::vector<std::pair<int, float>>& train,
                     const std::vector<std::pair<int, float>>& val) {
  double x0 = 0, x1 = 1, y0 = 1e30, y1 = -1e30;
  for (const auto* v : {&train, &val})
    for (auto& [s, l] : *v) {
      x1 = std::max(x1, double(s));
      y0 = std::min(y0, double(l));
      y1 = std::max(y1, double(l));
    }
  if (y0 > y1) y0 = 0, y1 = 1;
  y0 = std::floor(y0 * 2) / 2, y1 = std::ceil(y1 * 2) / 2;  // half-nat grid lines
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << kW << "' height='" << kH
    << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' "
       "fill='white'/>\n"
    << "<text x='" << kW / 2 << "' y='22' text-anchor='middle' font-size='14'>" << title
    << "</text>\n";
  for (double l = y0; l <= y1 + 1e-9; l += 0.5) {
    const double y = kH - kBottom - (l - y0) / std::max(1e-9, y1 - y0) * (kH - kTop - kBottom);
    char label[32];
    std::snprintf(label, sizeof label, "%.1f", l);
    o << "<line x1='" << kLeft << "' x2='" << kW - kRight << "' y1='" << y << "' y2='" << y
      << "' stroke='#ddd'/>\n<text x='" << kLeft - 6 << "' y='" << y + 4 << "' text-anchor='end'>"
      << label << "</text>\n";
  }
  o << "<text x='" << kW / 2 << "' y='" << kH - 12 << "' text-anchor='middle'>step (0 .. "
    << int(x1) << ")</text>\n<text x='16' y='" << kH / 2 << "' transform='rotate(-90 16 " << kH / 2
    << ")' text-anchor='middle'>loss (nats/char)</text>\n";
  o << polyline(train, x0, x1, y0, y1, "#1f77b4", false)
    << polyline(val, x0, x1, y0, y1, "#d62728", true);
  o << "<text x='" << kW - kRight - 150 << "' y='" << kTop + 10
    << "' fill='#1f77b4'>train</text><text x='" << kW - kRight - 80 << "' y='" << kTop + 10
    << "' fill='#d62728'>validation</text>\n</svg>\n";
  std::ofstream f(path);
  f << o.str();
  return bool(f);
}

}  // namespace gpt
