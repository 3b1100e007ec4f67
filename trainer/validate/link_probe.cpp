#include "validate/link_probe.hpp"

#include <algorithm>
#include <chrono>
#include <set>
#include <sstream>

#include "strata/types.hpp"

namespace gpt {

namespace {

struct Probe {
  strata::Dim dim;
  const char* collective;
};

// The collectives the layout runs on each of its dimensions.
std::vector<Probe> probes_of(const TrainOptions& o, const strata::MeshShape& shape) {
  std::vector<Probe> out;
  if (shape.tp > 1) {
    out.push_back({strata::Dim::tp, "all_reduce"});
    if (o.sp)
      out.push_back({strata::Dim::tp, "all_gather"}),
          out.push_back({strata::Dim::tp, "reduce_scatter"});
  }
  if (shape.pp > 1) out.push_back({strata::Dim::pp, "send/recv"});
  if (shape.cp > 1)  // attention's keys and values around the ring, or its all-to-alls
    out.push_back({strata::Dim::cp, o.cp_comm == CpComm::p2p ? "send/recv" : "all_to_all"});
  if (shape.ep > 1)  // the experts' rows, and the dense gradients' average
    out.push_back({strata::Dim::ep, "all_to_all"}), out.push_back({strata::Dim::ep, "all_reduce"});
  if (shape.dp > 1) {
    if (o.stage <= 1) out.push_back({strata::Dim::dp, "all_reduce"});
    if (o.stage >= 2) out.push_back({strata::Dim::dp, "reduce_scatter"});
    if (o.stage >= 1) out.push_back({strata::Dim::dp, "all_gather"});
  }
  return out;
}

// Bus bandwidth (GB/s, nccl-tests sense) of `collective` on `g` with `bytes` per rank's buffer:
// the fastest of `iters` runs. The question is what the links can carry, and on a shared machine
// one run that loses its core for a scheduler slice would otherwise decide it (a 0.7 ms step
// once read 5 % of the promise where the others read 9-12 %).
double measure(strata::Communicator& g, const std::string& collective, size_t bytes) {
  const int n = g.size(), iters = 7;
  const size_t count = bytes / sizeof(float) / size_t(n) * size_t(n);  // n blocks of one size
  std::vector<float> a(count, 1.0f), b(count, 0.0f);
  auto once = [&] {
    if (collective == "all_reduce") {
      g.all_reduce(strata::buffer(a), strata::buffer(b), strata::ReduceOp::sum).wait();
    } else if (collective == "all_gather") {
      g.all_gather(strata::Buffer{a.data(), count / size_t(n)}, strata::buffer(b)).wait();
    } else if (collective == "reduce_scatter") {
      g.reduce_scatter(strata::buffer(a), strata::Buffer{b.data(), count / size_t(n)},
                       strata::ReduceOp::sum)
          .wait();
    } else if (collective == "all_to_all") {
      g.all_to_all(strata::buffer(a), strata::buffer(b)).wait();
    } else {  // send/recv: every stage to the next, around the ring, at once
      strata::Work s = g.send(strata::buffer(a), (g.rank() + 1) % n, 7);
      g.recv(strata::buffer(b), (g.rank() + n - 1) % n, 7).wait();
      s.wait();
    }
  };
  once();
  g.barrier().wait();
  double t = 0;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    once();
    const double run = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    t = i == 0 ? run : std::min(t, run);
  }
  const double moved = double(count * sizeof(float));
  const double bus = collective == "all_reduce"  ? strata::all_reduce_bus_bytes(moved, n)
                     : collective == "send/recv" ? moved
                                                 : strata::gather_bus_bytes(moved, n);
  return bus / t / 1e9;
}

// Why the group's figure cannot speak for its links: a node of it runs more of the job's ranks
// than it has CPUs for them, so ranks take turns on cores and the probe times the scheduler.
std::string oversubscribed(const strata::JobTopology& job, const std::vector<int>& ranks) {
  for (int r : ranks) {
    const size_t node = size_t(job.node_of_rank[size_t(r)]);
    std::set<std::string> cpus;
    const std::vector<int> on = job.ranks_on(node);
    for (int k : on) {
      std::stringstream list(job.ranks[size_t(k)].cpus);
      for (std::string part; std::getline(list, part, ',');) {
        const size_t dash = part.find('-');
        if (dash == std::string::npos)
          cpus.insert(part);
        else
          for (int c = std::stoi(part.substr(0, dash)); c <= std::stoi(part.substr(dash + 1)); ++c)
            cpus.insert(std::to_string(c));
      }
    }
    if (!cpus.empty() && on.size() > cpus.size())
      return std::to_string(on.size()) + " ranks share " + std::to_string(cpus.size()) +
             " CPUs on " + job.ranks[size_t(r)].hostname;
  }
  return "";
}

}  // namespace

std::string link_label(const strata::JobTopology& job, int a, int b) {
  const bool cpus = job.ranks[size_t(a)].gpu < 0 && job.ranks[size_t(b)].gpu < 0;
  if (a != b && cpus && job.node_of_rank[size_t(a)] == job.node_of_rank[size_t(b)]) return "SHM";
  return std::string(strata::path_class_name(job.link(a, b).cls));
}

std::vector<ReportBandwidth> probe_groups(strata::Mesh& mesh, const TrainOptions& o,
                                          double threshold, size_t bytes) {
  const strata::MeshShape& shape = mesh.shape();
  strata::Communicator& world = mesh.world();
  const int n = world.size();
  std::vector<ReportBandwidth> out;
  for (const Probe& p : probes_of(o, shape)) {
    std::vector<double> mine{measure(mesh.group(p.dim), p.collective, bytes)};
    std::vector<double> all(static_cast<size_t>(n));
    world.all_gather(strata::buffer(mine), strata::buffer(all)).wait();
    if (world.rank() != 0) continue;
    // One row per group: its slowest member's figure, its weakest link's promise.
    for (int r = 0; r < n; ++r) {
      const std::vector<int> ranks = shape.group(r, {p.dim});
      if (ranks.front() != r) continue;
      ReportBandwidth b;
      b.dim = std::string(strata::dim_name(p.dim)), b.collective = p.collective, b.ranks = ranks;
      b.bytes = double(bytes), b.threshold = threshold, b.busbw_gbs = all[size_t(r)];
      bool first = true;
      for (size_t i = 0; i < ranks.size(); ++i) {
        b.busbw_gbs = std::min(b.busbw_gbs, all[size_t(ranks[i])]);
        for (size_t j = i + 1; j < ranks.size(); ++j) {
          const strata::Link l = mesh.topology().link(ranks[i], ranks[j]);
          if (first || l.bandwidth_gbs < b.promise_gbs) {
            b.promise_gbs = l.bandwidth_gbs;
            b.link_class = link_label(mesh.topology(), ranks[i], ranks[j]);
            first = false;
          }
        }
      }
      b.why_not_judged = oversubscribed(mesh.topology(), ranks);
      b.judged = b.why_not_judged.empty();
      b.pass = !b.judged || b.busbw_gbs >= threshold * b.promise_gbs;
      out.push_back(b);
    }
  }
  return out;
}

}  // namespace gpt
