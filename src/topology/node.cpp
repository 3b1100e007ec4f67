// NodeTopology's look-ups, and where a node comes from: STRATA_TOPO_FILE, a file, or the live
// machine.
#include <algorithm>
#include <tuple>

#include "base/config.hpp"
#include "base/log.hpp"
#include "bootstrap/node_identity.hpp"
#include "strata/topology.hpp"
#include "topology/cpuset.hpp"
#include "topology/dump.hpp"
#include "topology/errors.hpp"
#include "topology/estimates.hpp"
#include "topology/hwloc_source.hpp"
#include "topology/nccl_xml.hpp"
#include "topology/xml.hpp"

namespace strata {

std::vector<size_t> NodeTopology::of_kind(DeviceKind k) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].kind == k) out.push_back(i);
  return out;
}

int NodeTopology::find(std::string_view name) const {
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].name == name) return int(i);
  return -1;
}

int NodeTopology::gpu(int gpu) const {
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].kind == DeviceKind::gpu && devices[i].index == gpu) return int(i);
  return -1;
}

int NodeTopology::cpu(int os_index) const {
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].kind == DeviceKind::cpu && devices[i].index == os_index) return int(i);
  return -1;
}

int NodeTopology::nearest_nic(const std::string& cpus, int spread) const {
  topo::CpuSet mine;
  topo::CpuSet::parse_list(cpus, mine);
  std::vector<std::pair<std::tuple<int, int, int, double>, int>> ranked;
  for (size_t i : of_kind(DeviceKind::nic)) {
    const Device& nic = devices[i];
    topo::CpuSet local;
    bool known = topo::CpuSet::parse_list(nic.cpus, local) && !local.empty();
    PathClass cls =
        !known || mine.empty() || local.intersects(mine) ? PathClass::phb : PathClass::sys;
    double rate = nic.rate_gbps > 0 ? nic.rate_gbps : topo::default_nic_rate_gbps(nic.nic_kind);
    ranked.push_back({{topo::is_rdma(nic.nic_kind) ? 0 : 1, nic.port == PortState::down ? 1 : 0,
                       int(cls), -rate},
                      int(i)});
  }
  if (ranked.empty()) return -1;
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  size_t equal = 1;
  while (equal < ranked.size() && ranked[equal].first == ranked[0].first) ++equal;
  return ranked[size_t(spread < 0 ? 0 : spread) % equal].second;
}

NodeTopology load_node(const std::string& path) {
  const std::string text = topo::read_topology_file(path);
  std::string root = topo::root_element_name(text);
  if (root == "topology") return topo::load_hwloc_file(path);
  if (root == "system") return topo::load_nccl_xml(text, path);
  if (root == "strata-topology") return topo::pick_node(JobTopology::from_xml(text, path), path);
  topo::fail(path + ": not a topology file (root element <" + root +
             ">; expected hwloc's <topology>, NCCL's <system> or Strata's <strata-topology>)");
}

namespace {

// The machine does not change while a process runs, and hwloc's discovery costs: it reads every
// PCI device's configuration space (a trap to the hypervisor on a VM: 7 % of a 4-rank trainer
// test's CPU, 166 discoveries a rank), and every Mesh and group view asks.
const NodeTopology& live_node() {
  static const NodeTopology node = topo::detect_live();
  return node;
}

}  // namespace

NodeTopology detect_node() {
  NodeTopology node;
  const std::string& file = config().topo_file;
  if (!file.empty()) {
    node = load_node(file);
    STRATA_LOG(INFO, "TOPO") << "node read from STRATA_TOPO_FILE=" << file;
  } else {
    node = live_node();
  }
  node.id = bootstrap::node_identity();
  return node;
}

}  // namespace strata
