// --cluster FILE.json: the cluster a strata-perf run measured, its links fitted to the run.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "descent.hpp"
#include "inputs.hpp"
#include "json_scan.hpp"
#include "strata/cost.hpp"

namespace plan {

ClusterSpec cluster_from_perf(const std::string& path, Precision p) {
  std::ifstream in(path);
  const std::string s = canonical_json(
      std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument("--cluster '" + path + "': " + why);
  };
  const size_t c = s.find("\"collective\": \"");
  if (c == std::string::npos) fail("not a strata-perf --json file (no \"collective\")");
  const std::string collective = s.substr(c + 15, s.find('"', c + 15) - c - 15);
  size_t at = 0;
  const double ranks = number_after(s, at, "ranks", s.size());
  const double nodes = number_after(s, at, "nodes", s.size());
  if (!(ranks >= 2) || !(nodes >= 1) || std::fmod(ranks, nodes) != 0) {
    fail("needs \"ranks\" (2 or more) and \"nodes\" dividing them (strata-perf writes both)");
  }
  // Every row's size and its faster placement's time.
  std::vector<std::pair<double, double>> rows;  // bytes, seconds
  for (size_t k = s.find("{\"bytes\": ", at); k != std::string::npos;
       k = s.find("{\"bytes\": ", k + 1)) {
    const size_t end = std::min(s.find("{\"bytes\": ", k + 1), s.size());
    size_t q = k;
    const double bytes = number_after(s, q, "bytes", end);
    double best = INFINITY;
    for (const char* place : {"out_of_place", "in_place"}) {
      size_t r = s.find(std::string("\"") + place + "\": {", k);
      const double us = r < end ? number_after(s, r, "time_us", end) : NAN;
      if (us > 0) best = std::min(best, us * 1e-6);
    }
    if (bytes > 0 && std::isfinite(best)) rows.emplace_back(bytes, best);
  }
  if (rows.size() < 2) fail("fewer than two sizes measured: a link has a latency and a bandwidth");

  // The cluster it ran on: ranks / nodes per node, this machine's cores and rate; then the link
  // the run crossed (the network's across nodes, else the node's) fitted so the library's own
  // cost model gives the measured times (least squares of the log ratios).
  ClusterSpec cl =
      cluster_of(std::to_string(int(nodes)) + "x" + std::to_string(int(ranks / nodes)), "cpu", p);
  strata::GroupShape g;
  g.ranks = int(ranks), g.nodes = int(nodes), g.shared_memory = true;
  g.intra = cl.intra, g.inter = cl.inter;
  strata::Link& link = nodes > 1 ? g.inter : g.intra;
  try {
    strata::estimate_cost(collective, g, size_t(rows[0].first));
  } catch (const std::exception& e) {
    fail("collective '" + collective + "' has no cost model: " + e.what());
  }
  // The largest relative miss over the sizes, of the figures `link` has now.
  auto worst = [&] {
    double w = 0;
    for (const auto& [bytes, seconds] : rows) {
      const double model = strata::estimate_cost(collective, g, size_t(bytes)).seconds;
      w = std::max(w, std::abs(model - seconds) / seconds);
    }
    return w;
  };
  descend({&link.bandwidth_gbs, &link.latency_us}, [&] {
    double e = 0;
    for (const auto& [bytes, seconds] : rows) {
      const double r =
          std::log(strata::estimate_cost(collective, g, size_t(bytes)).seconds / seconds);
      e += r * r;
    }
    return e;
  });
  (nodes > 1 ? cl.inter : cl.intra) = link;
  std::ostringstream d;
  d.precision(3);
  d << path << ": " << collective << " on " << ranks << " ranks over " << nodes << " node"
    << (nodes > 1 ? "s" : "") << ", " << (nodes > 1 ? "network" : "node") << " link fitted to "
    << rows.size() << " sizes (" << link.bandwidth_gbs << " GB/s, " << link.latency_us
    << " us; the worst size " << std::lround(worst() * 100) << " % off)";
  cl.description = d.str();
  return cl;
}

}  // namespace plan
