// strata-topo: the node as Strata sees it, in the spirit of `nvidia-smi topo -m`: a matrix of path
// classes between GPUs and NICs with their CPU and NUMA affinity and the NIC each GPU uses, then
// the estimates behind the classes. Under mpirun or strata-run, the ranks gather the job view and
// rank 0 prints every node and then the job: nodes, local ranks and the links between groups; a
// Strata dump of a job (--job) shows the same offline. --json prints the same as JSON.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "strata/communicator.hpp"
#include "strata/error.hpp"
#include "strata/topology.hpp"

using namespace strata;

namespace {

struct Options {
  std::string input;  // node from a file instead of this machine
  std::string job;    // job view from a Strata dump
  std::string dump;   // write a Strata dump here
  bool json = false;
};

void usage(FILE* to) {
  std::fprintf(
      to,
      "usage: strata-topo [--input FILE] [--job FILE] [--dump FILE] [--json]\n"
      "  --input FILE  the node described in FILE (hwloc XML, NCCL topology XML or a\n"
      "                Strata dump) instead of this machine\n"
      "  --job FILE    the job view of a Strata dump: nodes, local ranks, links between groups\n"
      "  --dump FILE   also write what is shown as an editable Strata dump (docs/topology.md)\n"
      "  --json        JSON instead of tables\n");
}

// Appends `item` to a comma-separated list.
void append(std::string& list, const std::string& item, const char* sep = ", ") {
  if (!list.empty()) list += sep;
  list += item;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// ---- JSON ------------------------------------------------------------------------------------

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out += c;
    }
  }
  return out + "\"";
}
std::string quote(std::string_view s) { return quote(std::string(s)); }

std::string json_node(const NodeTopology& n) {
  std::string o = "{\"id\": " + quote(n.id) + ", \"hostname\": " + quote(n.hostname) +
                  ", \"source\": " + quote(n.source) + ", \"cpu_model\": " + quote(n.cpu_model) +
                  ", \"packages\": " + std::to_string(n.packages) +
                  ", \"cores\": " + std::to_string(n.cores) +
                  ", \"pus\": " + std::to_string(n.pus) +
                  ", \"nvlink_known\": " + (n.nvlink_known ? "true" : "false") + ",\n  \"numa\": [";
  for (size_t i = 0; i < n.numa.size(); ++i) {
    const NumaNode& m = n.numa[i];
    o += std::string(i ? ", " : "") + "{\"os_index\": " + std::to_string(m.os_index) +
         ", \"memory_bytes\": " + std::to_string(m.memory_bytes) + ", \"cpus\": " + quote(m.cpus) +
         ", \"package\": " + std::to_string(m.package) + "}";
  }
  o += "],\n  \"numa_distance\": [";
  std::string dist;
  for (uint32_t v : n.numa_distance) append(dist, std::to_string(v));
  o += dist + "],\n  \"devices\": [";
  for (size_t i = 0; i < n.devices.size(); ++i) {
    const Device& d = n.devices[i];
    o += std::string(i ? ",\n    " : "\n    ") + "{\"name\": " + quote(d.name) +
         ", \"kind\": " + quote(device_kind_name(d.kind)) +
         ", \"index\": " + std::to_string(d.index) + ", \"pci\": " + quote(d.pci_bus_id) +
         ", \"model\": " + quote(d.model) + ", \"numa\": " + std::to_string(d.numa) +
         ", \"cpus\": " + quote(d.cpus) + ", \"pcie_gbs\": " + fmt(d.pcie_gbs) +
         ", \"os_names\": [";
    std::string names;
    for (const auto& name : d.os_names) append(names, quote(name));
    o += names + "]";
    if (!d.uuid.empty()) o += ", \"uuid\": " + quote(d.uuid);
    if (d.kind == DeviceKind::nic) {
      const char* port[] = {"unknown", "down", "active"};
      o += ", \"nic_kind\": " + quote(nic_kind_name(d.nic_kind)) +
           ", \"port\": " + quote(std::string(port[int(d.port)])) +
           ", \"rate_gbps\": " + fmt(d.rate_gbps);
    }
    if (d.nearest_nic >= 0) o += ", \"nic\": " + quote(n.devices[size_t(d.nearest_nic)].name);
    o += "}";
  }
  // Links as three matrices over the device list, in its order.
  std::string cls = "[", bw = "[", lat = "[";
  for (size_t a = 0; a < n.devices.size(); ++a) {
    std::string c, b, l;
    for (size_t k = 0; k < n.devices.size(); ++k) {
      const Link& x = n.link(a, k);
      append(c, quote(path_class_name(x.cls)));
      append(b, fmt(x.bandwidth_gbs));
      append(l, fmt(x.latency_us));
    }
    const std::string sep = a ? ",\n      [" : "\n      [";
    cls += sep + c + "]";
    bw += sep + b + "]";
    lat += sep + l + "]";
  }
  o += "],\n  \"links\": {\"class\": " + cls + "],\n    \"bandwidth_gbs\": " + bw +
       "],\n    \"latency_us\": " + lat + "]}}";
  return o;
}

std::string json_job(const JobTopology& job) {
  std::string o = "{\"job\": {\"nodes\": [";
  for (size_t i = 0; i < job.nodes.size(); ++i)
    o += (i ? ",\n  " : "\n  ") + json_node(job.nodes[i]);
  o += "],\n \"ranks\": [";
  for (size_t r = 0; r < job.ranks.size(); ++r) {
    const RankPlacement& p = job.ranks[r];
    o += std::string(r ? ",\n  " : "\n  ") + "{\"rank\": " + std::to_string(p.rank) +
         ", \"node\": " + quote(p.node_id) + ", \"local_rank\": " + std::to_string(p.local_rank) +
         ", \"cpus\": " + quote(p.cpus) + ", \"numa\": " + std::to_string(p.numa) +
         ", \"gpu\": " + std::to_string(p.gpu) + ", \"nic\": " + quote(p.nic) + "}";
  }
  o += "],\n \"links\": {\"class\": [";
  std::string bw;
  for (size_t a = 0; a < job.ranks.size(); ++a) {
    std::string c, b;
    for (size_t k = 0; k < job.ranks.size(); ++k) {
      Link l = job.link(int(a), int(k));
      append(c, quote(path_class_name(l.cls)));
      append(b, fmt(l.bandwidth_gbs));
    }
    o += std::string(a ? ", " : "") + "[" + c + "]";
    bw += std::string(a ? ", " : "") + "[" + b + "]";
  }
  return o + "], \"bandwidth_gbs\": [" + bw + "]}}}";
}

// ---- tables ----------------------------------------------------------------------------------

void print_node(const NodeTopology& n) {
  auto gpus = n.of_kind(DeviceKind::gpu), nics = n.of_kind(DeviceKind::nic);
  std::printf("# strata-topo: node %s (%s)\n", n.hostname.empty() ? "?" : n.hostname.c_str(),
              n.source.c_str());
  std::printf("#   packages %d, NUMA nodes %zu, cores %d, hardware threads %d%s%s\n", n.packages,
              n.numa.size(), n.cores, n.pus, n.cpu_model.empty() ? "" : "; ", n.cpu_model.c_str());
  std::printf(
      "#   GPUs %zu, NICs %zu, NVSwitches %zu; NVLink %s\n", gpus.size(), nics.size(),
      n.of_kind(DeviceKind::nvswitch).size(),
      n.nvlink_known ? "information present" : "not visible (no NVML, no matrix in the input)");
  std::vector<size_t> show = gpus;
  show.insert(show.end(), nics.begin(), nics.end());
  if (!show.empty()) {
    size_t w = 6;
    for (size_t d : show) w = std::max(w, n.devices[d].name.size() + 2);
    std::printf("\n%*s", int(w), "");
    for (size_t d : show) std::printf("%-*s", int(w), n.devices[d].name.c_str());
    std::printf("%-18s%-15s%s\n", "CPU Affinity", "NUMA Affinity", "NIC");
    for (size_t a : show) {
      std::printf("%-*s", int(w), n.devices[a].name.c_str());
      for (size_t b : show)
        std::printf("%-*s", int(w),
                    a == b ? "X" : std::string(path_class_name(n.link(a, b).cls)).c_str());
      const Device& d = n.devices[a];
      std::string numa = d.numa < 0 ? "N/A" : std::to_string(d.numa);
      std::string nic = d.nearest_nic < 0 ? (d.kind == DeviceKind::gpu ? "none" : "")
                                          : n.devices[size_t(d.nearest_nic)].name;
      std::printf("%-18s%-15s%s\n", d.cpus.empty() ? "N/A" : d.cpus.c_str(), numa.c_str(),
                  nic.c_str());
    }
  }
  std::printf(
      "\nLegend (best first):\n"
      "  X   = self\n"
      "  NVL = direct NVLink (or AMD xGMI)\n"
      "  NVB = NVLink through NVSwitches\n"
      "  PIX = PCIe through at most one PCIe switch\n"
      "  PXB = PCIe through several PCIe switches, not through the host bridge\n"
      "  PHB = through a PCIe host bridge / the CPU of one NUMA node\n"
      "  SYS = across the interconnect between NUMA nodes (UPI, Infinity Fabric, X-Bus)\n");
  // The estimates behind each class seen between the devices above: range and an example pair.
  struct Seen {
    double lo = 0, hi = 0, lat = 0;
    std::string example;
  };
  std::map<PathClass, Seen> seen;
  auto cpus = n.of_kind(DeviceKind::cpu);
  for (const auto* group : {&show, &cpus})
    for (size_t a : *group)
      for (size_t b : *group) {
        if (b <= a) continue;
        const Link& l = n.link(a, b);
        auto [it, fresh] = seen.try_emplace(l.cls);
        Seen& s = it->second;
        if (fresh) {
          s = {l.bandwidth_gbs, l.bandwidth_gbs, l.latency_us,
               n.devices[a].name + "-" + n.devices[b].name};
        }
        s.lo = std::min(s.lo, l.bandwidth_gbs);
        s.hi = std::max(s.hi, l.bandwidth_gbs);
        s.lat = std::max(s.lat, l.latency_us);
      }
  if (!seen.empty()) {
    std::printf("\nEstimates (one direction; docs/topology.md says where they come from):\n");
    for (const auto& [c, s] : seen) {
      std::string bw = s.lo == s.hi ? fmt(s.lo) : fmt(s.lo) + "-" + fmt(s.hi);
      std::printf("  %s  %12s GB/s  %5s us   e.g. %s\n", std::string(path_class_name(c)).c_str(),
                  bw.c_str(), fmt(s.lat).c_str(), s.example.c_str());
    }
  }
  if (!nics.empty()) {
    std::printf("\nNICs:\n");
    for (size_t i : nics) {
      const Device& d = n.devices[i];
      const char* port[] = {"port state unknown", "port down", "port active"};
      std::string rate = d.rate_gbps > 0 ? fmt(d.rate_gbps) + " Gb/s" : "rate unknown";
      std::string also;
      for (const auto& s : d.os_names) also += (also.empty() ? " (" : ", ") + s;
      if (!also.empty()) also += ")";
      std::printf("  %-12s %-10s %-18s %-14s PCI %-13s NUMA %s%s\n", d.name.c_str(),
                  std::string(nic_kind_name(d.nic_kind)).c_str(), port[int(d.port)], rate.c_str(),
                  d.pci_bus_id.empty() ? "-" : d.pci_bus_id.c_str(),
                  d.numa < 0 ? "N/A" : std::to_string(d.numa).c_str(), also.c_str());
    }
  }
  std::printf("\nNUMA nodes:\n");
  for (size_t i = 0; i < n.numa.size(); ++i) {
    const NumaNode& m = n.numa[i];
    std::string dist;
    if (n.numa_distance.size() == n.numa.size() * n.numa.size()) {
      dist = "; distances";
      for (size_t k = 0; k < n.numa.size(); ++k)
        dist += " " + std::to_string(n.numa_distance[i * n.numa.size() + k]);
    }
    std::string mem =
        m.memory_bytes ? fmt(double(m.memory_bytes) / double(1ull << 30)) + " GiB" : "memory ?";
    int cpu = n.cpu(m.os_index);
    std::string nic = cpu >= 0 && n.devices[size_t(cpu)].nearest_nic >= 0
                          ? ", NIC " + n.devices[size_t(n.devices[size_t(cpu)].nearest_nic)].name
                          : "";
    std::printf("  NUMA %d: %s, cpus %s, package %s%s%s\n", m.os_index, mem.c_str(), m.cpus.c_str(),
                m.package < 0 ? "?" : std::to_string(m.package).c_str(), nic.c_str(), dist.c_str());
  }
}

std::string range(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    append(out, std::to_string(ranks[i]), ",");
    if (j > i) {
      out += '-';
      out += std::to_string(ranks[j]);
    }
    i = j;
  }
  return out;
}

void print_job(const JobTopology& job) {
  std::printf("# strata-topo: job of %zu ranks on %zu nodes\n", job.ranks.size(), job.nodes.size());
  for (size_t i = 0; i < job.nodes.size(); ++i) {
    const NodeTopology& n = job.nodes[i];
    std::printf("\nnode %zu: %s (%s): ranks %s; %zu GPUs, %zu NICs\n", i, n.id.c_str(),
                n.hostname.c_str(), range(job.ranks_on(i)).c_str(),
                n.of_kind(DeviceKind::gpu).size(), n.of_kind(DeviceKind::nic).size());
    for (int r : job.ranks_on(i)) {
      const RankPlacement& p = job.ranks[size_t(r)];
      std::printf("  rank %-4d local %-3d GPU %-4s NIC %-12s NUMA %-4s cpus %s\n", r, p.local_rank,
                  p.gpu < 0 ? "-" : std::to_string(p.gpu).c_str(),
                  p.nic.empty() ? "-" : p.nic.c_str(),
                  p.numa < 0 ? "-" : std::to_string(p.numa).c_str(), p.cpus.c_str());
    }
  }
  // Between groups (one group per node): the slowest link between their ranks.
  std::printf("\nLinks between nodes (slowest rank pair; class, GB/s):\n%8s", "");
  for (size_t b = 0; b < job.nodes.size(); ++b)
    std::printf("%-16s", ("node " + std::to_string(b)).c_str());
  std::printf("\n");
  for (size_t a = 0; a < job.nodes.size(); ++a) {
    std::printf("node %-3zu", a);
    for (size_t b = 0; b < job.nodes.size(); ++b) {
      Link worst{PathClass::loc, 1e30, 0};
      bool any = false;
      for (int x : job.ranks_on(a))
        for (int y : job.ranks_on(b)) {
          if (x == y) continue;
          Link l = job.link(x, y);
          if (!any || l.cls > worst.cls ||
              (l.cls == worst.cls && l.bandwidth_gbs < worst.bandwidth_gbs))
            worst = l;
          any = true;
        }
      std::string cell =
          any ? std::string(path_class_name(worst.cls)) + " " + fmt(worst.bandwidth_gbs) : "-";
      std::printf("%-16s", cell.c_str());
    }
    std::printf("\n");
  }
  if (job.ranks.size() <= 32) {
    std::printf("\nRank pairs:\n%6s", "");
    for (size_t b = 0; b < job.ranks.size(); ++b) std::printf("%-5zu", b);
    std::printf("\n");
    for (size_t a = 0; a < job.ranks.size(); ++a) {
      std::printf("%-6zu", a);
      for (size_t b = 0; b < job.ranks.size(); ++b)
        std::printf(
            "%-5s",
            a == b ? "X" : std::string(path_class_name(job.link(int(a), int(b)).cls)).c_str());
      std::printf("\n");
    }
  }
}

// Ranks of the job this process was launched in (mpirun, strata-run/torchrun), 1 when alone.
int launched_ranks() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string& into) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "strata-topo: %s needs a file name\n", a.c_str());
        std::exit(2);
      }
      into = argv[++i];
    };
    if (a == "--input")
      value(opt.input);
    else if (a == "--job")
      value(opt.job);
    else if (a == "--dump")
      value(opt.dump);
    else if (a == "--json")
      opt.json = true;
    else if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "strata-topo: unknown argument %s\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  try {
    JobTopology job;
    bool job_view = !opt.job.empty();
    // Under a launcher, the ranks gather the job view and rank 0 shows it.
    const bool gathered = !job_view && opt.input.empty() && launched_ranks() > 1;
    if (job_view) {
      job = JobTopology::load(opt.job);
    } else if (gathered) {
      Communicator world = Communicator::from_env();
      job = JobTopology::gather(world);
      if (world.rank() != 0) return 0;
      job_view = true;
    } else {
      NodeTopology node = opt.input.empty() ? detect_node() : load_node(opt.input);
      if (!opt.input.empty() && node.id.empty())
        node.id = node.hostname.empty() ? "node0" : node.hostname;
      RankPlacement me = opt.input.empty() ? place_rank(node, 0) : RankPlacement{};
      me.node_id = node.id;
      job = JobTopology::assemble({node}, opt.input.empty() ? std::vector<RankPlacement>{me}
                                                            : std::vector<RankPlacement>{});
    }
    if (!opt.dump.empty()) job.save(opt.dump);
    if (opt.json) {
      std::printf("%s\n", job_view ? json_job(job).c_str()
                                   : ("{\"node\": " + json_node(job.nodes[0]) + "}").c_str());
      return 0;
    }
    if (gathered) {
      for (const NodeTopology& n : job.nodes) print_node(n);
      std::printf("\n");
    }
    if (job_view)
      print_job(job);
    else
      print_node(job.nodes[0]);
    if (!opt.dump.empty()) std::printf("\n# dump written to %s\n", opt.dump.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
