#include "validate/provenance.hpp"

#include <sys/utsname.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "model/gpt_model.hpp"
#include "strata/version.hpp"
#include "validate/link_probe.hpp"

extern char** environ;

namespace gpt {

void describe_inventory(const strata::JobTopology& job, Report& rep) {
  for (size_t i = 0; i < job.nodes.size(); ++i) {
    const std::vector<int> ranks = job.ranks_on(i);
    const strata::NodeTopology& node = job.nodes[i];
    rep.nodes.push_back(
        {job.ranks[size_t(ranks.front())].hostname, ranks, node.cpu_model, node.cores, node.pus});
  }
  const int n = int(job.ranks.size());
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) {
      const strata::Link l = job.link(a, b);
      const std::string cls = link_label(job, a, b);
      auto it = std::find_if(rep.links.begin(), rep.links.end(), [&](const ReportLink& k) {
        return k.cls == cls && k.bandwidth_gbs == l.bandwidth_gbs;
      });
      if (it == rep.links.end())
        rep.links.push_back({cls, l.bandwidth_gbs, -1, l.latency_us, a, b, 1});
      else
        ++it->pairs;
    }
}

void measure_links(strata::Communicator& world, Report& rep, size_t bytes) {
  const int me = world.rank(), rounds = 5, tag = 11;
  std::vector<uint8_t> out(bytes, 1), in(bytes);
  for (ReportLink& l : rep.links) {
    double rate = 0;
    const int peer = me == l.example_a ? l.example_b : me == l.example_b ? l.example_a : -1;
    if (peer >= 0) {
      double best = 0;
      for (int i = 0; i <= rounds; ++i) {  // round 0 connects and warms up
        const auto t0 = std::chrono::steady_clock::now();
        strata::Work s = world.send(strata::buffer(out), peer, tag);
        world.recv(strata::buffer(in), peer, tag).wait();
        s.wait();
        const double t =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (i > 0) best = std::max(best, double(bytes) / t / 1e9);
      }
      rate = best;
    }
    // Both ends timed the exchange; the slower one speaks for the link.
    std::vector<double> ends{me == l.example_a ? rate : 0, me == l.example_b ? rate : 0};
    world.all_reduce(strata::buffer(ends), strata::ReduceOp::max).wait();
    l.measured_gbs = std::min(ends[0], ends[1]);
  }
}

void describe_software(Report& rep) {
  utsname u{};
  if (::uname(&u) == 0) rep.kernel = std::string(u.sysname) + " " + u.release;
  rep.libraries = strata::library_versions();
  rep.libraries.erase(rep.libraries.begin());  // Strata's own version has its row already
  rep.libraries.push_back({"OpenBLAS", blas_config()});
  const char* prefixes[] = {"STRATA_", "UCX_", "OPENBLAS_", "OMP_", "GOTO_"};
  const char* secrets[] = {"TOKEN", "SECRET", "KEY", "PASSWORD"};
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = entry.substr(0, eq);
    if (std::none_of(std::begin(prefixes), std::end(prefixes),
                     [&](const char* p) { return name.rfind(p, 0) == 0; }))
      continue;
    const bool secret = std::any_of(std::begin(secrets), std::end(secrets), [&](const char* s) {
      return name.find(s) != std::string::npos;
    });
    rep.environment.push_back({name, secret ? "(set; value withheld)" : entry.substr(eq + 1)});
  }
  std::sort(rep.environment.begin(), rep.environment.end());
}

}  // namespace gpt
