// Path classes and estimates between every pair of a node's devices, and the NIC each GPU and
// each NUMA node uses.
#include <algorithm>
#include <set>
#include <tuple>

#include "topology/cpuset.hpp"
#include "topology/estimates.hpp"
#include "topology/graph.hpp"

namespace strata::topo {
namespace {

// The chain from a PCI node up to its root.
std::vector<int> chain_up(const NodeGraph& g, int node) {
  std::vector<int> c;
  for (int n = node; n >= 0; n = g.pci[size_t(n)].parent) c.push_back(n);
  return c;
}

bool same_numa(int a, int b) { return a < 0 || b < 0 || a == b; }

// NVLink bandwidth between two devices: a direct link, or through the NVSwitches (all switches of
// a node are taken as one fabric, as NCCL does: the switch-to-switch trunks are not visible).
struct Fabric {
  explicit Fabric(const NodeGraph& g)
      : n(g.node.devices.size()), direct(n * n, 0), to_switch(n, 0) {
    for (const FabricLink& f : g.fabric) {
      if (f.a == f.b || f.gbs <= 0) continue;
      direct[size_t(f.a) * n + size_t(f.b)] += f.gbs;
      direct[size_t(f.b) * n + size_t(f.a)] += f.gbs;
      // A GPU's bandwidth into the switches, and each switch's total.
      if (g.node.devices[size_t(f.a)].kind == DeviceKind::nvswitch ||
          g.node.devices[size_t(f.b)].kind == DeviceKind::nvswitch) {
        to_switch[size_t(f.a)] += f.gbs;
        to_switch[size_t(f.b)] += f.gbs;
      }
    }
  }
  size_t n;
  std::vector<double> direct;
  std::vector<double> to_switch;
};

Link estimate(const NodeGraph& g, const Fabric& fab, size_t a, size_t b) {
  const Device& da = g.node.devices[a];
  const Device& db = g.node.devices[b];
  if (a == b) return self_link(da);
  if (double bw = fab.direct[a * fab.n + b]; bw > 0)
    return {PathClass::nvl, bw, class_latency_us(PathClass::nvl)};
  bool fabric_kinds = da.kind != DeviceKind::cpu && db.kind != DeviceKind::cpu &&
                      da.kind != DeviceKind::nic && db.kind != DeviceKind::nic;
  if (fabric_kinds && fab.to_switch[a] > 0 && fab.to_switch[b] > 0)
    return {PathClass::nvb, std::min(fab.to_switch[a], fab.to_switch[b]),
            class_latency_us(PathClass::nvb)};
  PathClass cls = pcie_class(g, a, b);
  // The PCIe links of the two ends bound the path; the socket interconnect bounds SYS.
  double bw = 0;
  for (const Device* d : {&da, &db}) {
    if (d->kind == DeviceKind::cpu) continue;
    double own = d->pcie_gbs > 0 ? d->pcie_gbs : kPcieGen3x16Gbs;
    bw = bw == 0 ? own : std::min(bw, own);
  }
  if (cls == PathClass::sys) {
    double socket = inter_socket_gbs(g.cpu);
    bw = bw == 0 ? socket : std::min(bw, socket);
  }
  if (bw == 0) bw = kHostCopyGbs;
  return {cls, bw, class_latency_us(cls)};
}

// Orders candidate NICs: RDMA first, usable ports first, then the nearest, then the fastest.
using NicKey = std::tuple<int, int, int, double>;
NicKey nic_key(const Device& nic, PathClass cls, double bw) {
  return {is_rdma(nic.nic_kind) ? 0 : 1, nic.port == PortState::down ? 1 : 0, int(cls), -bw};
}

void choose_nics(NodeGraph& g, DeviceKind kind) {
  NodeTopology& node = g.node;
  std::vector<size_t> nics = node.of_kind(DeviceKind::nic);
  std::vector<int> uses(node.devices.size(), 0);
  for (size_t d : node.of_kind(kind)) {
    int best = -1;
    std::tuple<NicKey, int> best_key;
    for (size_t nic : nics) {
      const Link& l = node.link(d, nic);
      // Among equally good NICs, the least used one: GPUs spread over a node's HCAs.
      auto key = std::make_tuple(nic_key(node.devices[nic], l.cls, l.bandwidth_gbs), uses[nic]);
      if (best < 0 || key < best_key) {
        best = int(nic);
        best_key = key;
      }
    }
    node.devices[d].nearest_nic = best;
    if (best >= 0) ++uses[size_t(best)];
  }
}

}  // namespace

PathClass pcie_class(const NodeGraph& g, size_t a, size_t b) {
  const Device& da = g.node.devices[a];
  const Device& db = g.node.devices[b];
  if (a == b) return PathClass::loc;
  int pa = g.device_pci[a], pb = g.device_pci[b];
  if (pa < 0 || pb < 0) return same_numa(da.numa, db.numa) ? PathClass::phb : PathClass::sys;
  std::vector<int> ca = chain_up(g, pa), cb = chain_up(g, pb);
  auto lca_b = std::find_if(cb.begin(), cb.end(),
                            [&](int n) { return std::find(ca.begin(), ca.end(), n) != ca.end(); });
  if (lca_b == cb.end()) {
    // Different root complexes: through the CPU, one socket or two.
    return same_numa(da.numa, db.numa) ? PathClass::phb : PathClass::sys;
  }
  int lca = *lca_b;
  if (g.pci[size_t(lca)].host) return PathClass::phb;
  // Below one root port: count the PCIe switches the path crosses.
  std::set<int> switches;
  for (const auto* c : {&ca, &cb}) {
    for (int n : *c) {
      if (g.pci[size_t(n)].pcie_switch >= 0) switches.insert(g.pci[size_t(n)].pcie_switch);
      if (n == lca) break;
    }
  }
  return switches.size() <= 1 ? PathClass::pix : PathClass::pxb;
}

void compute_links(NodeGraph& g) {
  const size_t n = g.node.devices.size();
  Fabric fab(g);
  g.node.links.assign(n * n, Link{});
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b) g.node.links[a * n + b] = estimate(g, fab, a, b);
  choose_nics(g, DeviceKind::gpu);
  choose_nics(g, DeviceKind::cpu);
}

}  // namespace strata::topo
