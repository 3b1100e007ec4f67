// Reads a node through hwloc: CPUs and NUMA nodes from the object tree, GPUs, NICs and NVSwitches
// from the PCI devices and their OS devices, the PCIe tree for path classes, and NVLink from the
// NVLinkBandwidth (or AMD's XGMIBandwidth) distances matrix.
#include "topology/hwloc_source.hpp"

#include <hwloc.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>

#include "base/log.hpp"
#include "topology/cpuset.hpp"
#include "topology/errors.hpp"
#include "topology/nvml.hpp"
#include "topology/sysfs.hpp"

namespace strata::topo {
namespace {

constexpr unsigned kVendorNvidia = 0x10de, kVendorAmd = 0x1002, kVendorAmazon = 0x1d0f;

struct Topology {
  hwloc_topology_t t = nullptr;
  ~Topology() {
    if (t) hwloc_topology_destroy(t);
  }
};

std::string list_of(hwloc_const_bitmap_t b) {
  if (!b) return "";
  char* s = nullptr;
  if (hwloc_bitmap_list_asprintf(&s, b) < 0 || !s) return "";
  std::string out(s);
  std::free(s);
  return out;
}

std::string info(hwloc_obj_t o, const char* name) {
  const char* v = o ? hwloc_obj_get_info_by_name(o, name) : nullptr;
  return v ? v : "";
}

int int_info(hwloc_obj_t o, const char* name) {
  std::string v = info(o, name);
  try {
    return v.empty() ? -1 : std::stoi(v);
  } catch (...) {
    return -1;
  }
}

std::string bus_id(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p) {
  char out[32];
  std::snprintf(out, sizeof out, "%04x:%02x:%02x.%x", unsigned(p.domain), unsigned(p.bus),
                unsigned(p.dev), unsigned(p.func));
  return out;
}

bool is_bridge(hwloc_obj_t o) { return o && o->type == HWLOC_OBJ_BRIDGE; }
bool is_host_bridge(hwloc_obj_t o) {
  return is_bridge(o) && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
}
bool starts_with(const char* s, const char* prefix) {
  return s && std::string_view(s).starts_with(prefix);
}

class Reader {
 public:
  Reader(hwloc_topology_t t, bool live) : t_(t), live_(live) {}

  NodeGraph read() {
    read_cpus();
    for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_pcidev(t_, o));) read_pci_device(o);
    read_loose_os_devices();
    read_fabric("NVLinkBandwidth");
    read_fabric("XGMIBandwidth");
    return std::move(g_);
  }

 private:
  void read_cpus() {
    NodeTopology& n = g_.node;
    hwloc_obj_t root = hwloc_get_root_obj(t_);
    n.packages = hwloc_get_nbobjs_by_type(t_, HWLOC_OBJ_PACKAGE);
    n.cores = hwloc_get_nbobjs_by_type(t_, HWLOC_OBJ_CORE);
    n.pus = hwloc_get_nbobjs_by_type(t_, HWLOC_OBJ_PU);
    n.hostname = info(root, "HostName");
    g_.cpu.arch = info(root, "Architecture");
    hwloc_obj_t package = hwloc_get_obj_by_type(t_, HWLOC_OBJ_PACKAGE, 0);
    n.cpu_model = info(package, "CPUModel");
    g_.cpu.vendor = info(package, "CPUVendor");
    g_.cpu.family = int_info(package, "CPUFamilyNumber");
    g_.cpu.model = int_info(package, "CPUModelNumber");
    const int numas = hwloc_get_nbobjs_by_type(t_, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < numas; ++i) {
      hwloc_obj_t o = hwloc_get_obj_by_type(t_, HWLOC_OBJ_NUMANODE, unsigned(i));
      NumaNode numa;
      numa.os_index = int(o->os_index);
      numa.memory_bytes = o->attr->numanode.local_memory;
      numa.cpus = list_of(o->cpuset);
      hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(t_, HWLOC_OBJ_PACKAGE, o);
      numa.package = pkg ? int(pkg->logical_index) : -1;
      n.numa.push_back(numa);
      Device cpu;
      cpu.kind = DeviceKind::cpu;
      cpu.index = numa.os_index;
      cpu.numa = numa.os_index;
      cpu.cpus = numa.cpus;
      cpu.model = n.cpu_model;
      g_.add_device(std::move(cpu), -1);
    }
    hwloc_distances_s* d = nullptr;
    unsigned nr = 1;
    if (hwloc_distances_get_by_name(t_, "NUMALatency", &nr, &d, 0) == 0 && nr > 0) {
      if (d->nbobjs == unsigned(numas)) {
        // The matrix lists NUMA nodes in its own order; store it in logical order.
        n.numa_distance.assign(size_t(numas) * size_t(numas), 0);
        for (unsigned i = 0; i < d->nbobjs; ++i)
          for (unsigned j = 0; j < d->nbobjs; ++j)
            n.numa_distance[d->objs[i]->logical_index * unsigned(numas) +
                            d->objs[j]->logical_index] = uint32_t(d->values[i * d->nbobjs + j]);
      }
      hwloc_distances_release(t_, d);
    }
  }

  // NUMA node of an object (through its first non-I/O ancestor): -1 when it spans several.
  static int numa_of(hwloc_topology_t t, hwloc_obj_t o) {
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, o);
    if (!anc || !anc->nodeset || hwloc_bitmap_weight(anc->nodeset) != 1) return -1;
    return hwloc_bitmap_first(anc->nodeset);
  }
  std::string cpus_of(hwloc_obj_t o) const {
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t_, o);
    return anc ? list_of(anc->cpuset) : "";
  }

  // The PciNode of a bridge or PCI device, created on first use with its ancestors.
  int pci_node(hwloc_obj_t o) {
    if (auto it = pci_nodes_.find(o); it != pci_nodes_.end()) return it->second;
    PciNode p;
    hwloc_obj_t up = o->parent;
    if (is_host_bridge(o)) {
      p.host = true;
      p.numa = numa_of(t_, o);
    } else if (up && (up->type == HWLOC_OBJ_BRIDGE || up->type == HWLOC_OBJ_PCI_DEVICE)) {
      p.parent = pci_node(up);
      if (o->type == HWLOC_OBJ_BRIDGE) {
        if (is_host_bridge(up)) {
          p.host = true;  // a root port: part of the root complex, as NCCL sees it
        } else {
          // Below a root port, PCIe alternates switch upstream ports (odd depth) and their
          // downstream ports (even depth): a downstream port belongs to its parent's switch.
          int depth = bridge_depth(o);
          p.pcie_switch = depth % 2 == 1 ? next_switch_++ : g_.pci[size_t(p.parent)].pcie_switch;
        }
      }
    } else {
      p.numa = numa_of(t_, o);  // a PCI object right under the CPU side: a root of its own
    }
    g_.pci.push_back(p);
    int index = int(g_.pci.size() - 1);
    pci_nodes_[o] = index;
    return index;
  }

  // Number of PCI bridges between `o` and its host bridge (a root port has 0).
  static int bridge_depth(hwloc_obj_t o) {
    int depth = 0;
    for (hwloc_obj_t p = o->parent; is_bridge(p) && !is_host_bridge(p); p = p->parent) ++depth;
    return depth;
  }

  void read_pci_device(hwloc_obj_t o) {
    const auto& pci = o->attr->pcidev;
    std::vector<hwloc_obj_t> osdevs;
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling)
      if (c->type == HWLOC_OBJ_OS_DEVICE) osdevs.push_back(c);
    bool compute = false, fabric = false, network = false;
    for (hwloc_obj_t c : osdevs) {
      auto type = c->attr->osdev.type;
      const char* sub = c->subtype;
      if ((type == HWLOC_OBJ_OSDEV_COPROC || type == HWLOC_OBJ_OSDEV_GPU) &&
          (starts_with(sub, "CUDA") || starts_with(sub, "NVML") || starts_with(sub, "RSMI") ||
           starts_with(c->name, "cuda") || starts_with(c->name, "nvml") ||
           starts_with(c->name, "rsmi")))
        compute = true;
      if (type == HWLOC_OBJ_OSDEV_OPENFABRICS) fabric = true;
      if (type == HWLOC_OBJ_OSDEV_NETWORK) network = true;
    }
    const bool display = (pci.class_id >> 8) == 0x03;
    const bool nvswitch = starts_with(o->subtype, "NVSwitch") ||
                          (pci.vendor_id == kVendorNvidia && pci.class_id == 0x0680);
    Device d;
    d.pci_bus_id = bus_id(pci);
    d.numa = numa_of(t_, o);
    d.cpus = cpus_of(o);
    // hwloc keeps GB/s in a float; two decimals are all it means (15.75 for gen3 x16).
    d.pcie_gbs = pci.linkspeed > 0 ? std::round(double(pci.linkspeed) * 100) / 100 : 0;
    d.model = info(o, "PCIDevice");
    if (nvswitch) {
      d.kind = DeviceKind::nvswitch;
    } else if (compute ||
               (display && (pci.vendor_id == kVendorNvidia || pci.vendor_id == kVendorAmd))) {
      d.kind = DeviceKind::gpu;
      for (hwloc_obj_t c : osdevs) {
        if (c->name) d.os_names.push_back(c->name);
        if (std::string m = info(c, "GPUModel"); !m.empty()) d.model = m;
        if (std::string u = info(c, "NVIDIAUUID"); !u.empty()) d.uuid = u;
      }
    } else if (fabric || network) {
      d.kind = DeviceKind::nic;
      describe_nic(d, osdevs, pci.class_id, pci.vendor_id, pci.device_id);
    } else {
      return;
    }
    size_t index = g_.add_device(std::move(d), pci_node(o));
    devices_of_[o] = index;
    for (hwloc_obj_t c : osdevs) devices_of_[c] = index;
  }

  // OpenFabrics and Network OS devices that hang off no PCI device (hwloc puts them under their
  // CPU-side ancestor).
  void read_loose_os_devices() {
    for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_osdev(t_, o));) {
      auto type = o->attr->osdev.type;
      if (type != HWLOC_OBJ_OSDEV_OPENFABRICS && type != HWLOC_OBJ_OSDEV_NETWORK) continue;
      if (o->parent && o->parent->type == HWLOC_OBJ_PCI_DEVICE) continue;
      Device d;
      d.kind = DeviceKind::nic;
      d.numa = numa_of(t_, o);
      d.cpus = cpus_of(o);
      describe_nic(d, {o}, 0, 0, 0);
      devices_of_[o] = g_.add_device(std::move(d), -1);
    }
  }

  void describe_nic(Device& d, const std::vector<hwloc_obj_t>& osdevs, unsigned class_id,
                    unsigned vendor, unsigned device) {
    hwloc_obj_t rdma = nullptr;
    for (hwloc_obj_t c : osdevs)
      if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && !rdma) rdma = c;
    for (hwloc_obj_t c : osdevs)
      if (c != rdma && c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && c->name)
        d.os_names.push_back(c->name);
    if (rdma && rdma->name) {
      d.name = rdma->name;
    } else if (!d.os_names.empty()) {
      d.name = d.os_names.front();
      d.os_names.erase(d.os_names.begin());
    }
    const std::string& n = d.name;
    if ((vendor == kVendorAmazon && (device & 0xfff0) == 0xefa0) || n.starts_with("rdmap") ||
        n.starts_with("efa"))
      d.nic_kind = NicKind::efa;
    else if (n.starts_with("hfi1") || class_id == 0x0208)
      d.nic_kind = NicKind::omnipath;
    else if (class_id == 0x0207 || (rdma && (n.starts_with("mlx") || n.starts_with("qib"))))
      d.nic_kind = class_id == 0x0200 ? NicKind::roce : NicKind::infiniband;
    else if (rdma)
      d.nic_kind = NicKind::roce;  // an RDMA device on an Ethernet function
    else
      d.nic_kind = NicKind::ethernet;
    // hwloc records the IB port state (1 down, 2 init, 3 armed, 4 active).
    if (int state = int_info(rdma, "Port1State"); state > 0)
      d.port = state == 4 || state == 5 ? PortState::active : PortState::down;
    if (live_) apply_sysfs(d, rdma != nullptr);
  }

  // Live only: rates and states that hwloc does not report.
  static void apply_sysfs(Device& d, bool rdma) {
    NicSysfs s = rdma ? read_rdma_sysfs("/sys", d.name) : read_netdev_sysfs("/sys", d.name);
    if (rdma && s.rate_gbps == 0 && !d.os_names.empty())
      s.rate_gbps = read_netdev_sysfs("/sys", d.os_names.front()).rate_gbps;
    if (s.rate_gbps > 0) d.rate_gbps = s.rate_gbps;
    if (s.port != PortState::unknown) d.port = s.port;
    if (rdma && s.link_layer == "Ethernet" && d.nic_kind == NicKind::infiniband)
      d.nic_kind = NicKind::roce;
  }

  // A bandwidth matrix (MB/s) between GPUs, NVSwitches and CPU packages.
  void read_fabric(const char* name) {
    hwloc_distances_s* d = nullptr;
    unsigned nr = 1;
    if (hwloc_distances_get_by_name(t_, name, &nr, &d, 0) != 0 || nr == 0) return;
    g_.node.nvlink_known = true;
    std::vector<std::vector<int>> ends(d->nbobjs);
    for (unsigned i = 0; i < d->nbobjs; ++i) ends[i] = endpoints(d->objs[i]);
    for (unsigned i = 0; i < d->nbobjs; ++i) {
      for (unsigned j = i + 1; j < d->nbobjs; ++j) {
        uint64_t mbs = std::max(d->values[i * d->nbobjs + j], d->values[j * d->nbobjs + i]);
        if (mbs == 0) continue;
        for (int a : ends[i])
          for (int b : ends[j]) g_.fabric.push_back({a, b, double(mbs) / 1000.0});
      }
    }
    hwloc_distances_release(t_, d);
  }

  // The devices a matrix object stands for: a GPU (OS device or PCI device), an NVSwitch, or the
  // cpu devices of a package (POWER CPU-GPU NVLink).
  std::vector<int> endpoints(hwloc_obj_t o) {
    if (auto it = devices_of_.find(o); it != devices_of_.end()) return {int(it->second)};
    std::vector<int> out;
    if (o->type == HWLOC_OBJ_PACKAGE || o->type == HWLOC_OBJ_NUMANODE) {
      for (size_t i = 0; i < g_.node.devices.size(); ++i) {
        const Device& cpu = g_.node.devices[i];
        if (cpu.kind != DeviceKind::cpu) continue;
        hwloc_obj_t numa = hwloc_get_numanode_obj_by_os_index(t_, unsigned(cpu.index));
        if (numa && hwloc_bitmap_isincluded(numa->nodeset, o->nodeset)) out.push_back(int(i));
      }
    }
    return out;
  }

  hwloc_topology_t t_;
  bool live_;
  NodeGraph g_;
  std::map<hwloc_obj_t, int> pci_nodes_;
  std::map<hwloc_obj_t, size_t> devices_of_;
  int next_switch_ = 0;
};

// A topology with every PCI object and OS device kept (paths need every bridge; NVSwitches are
// "unimportant" to hwloc's default filter), and disallowed CPUs included (the node, not the
// cgroup).
void prepare(Topology& topo) {
  hwloc_topology_init(&topo.t);
  hwloc_topology_set_io_types_filter(topo.t, HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_flags(topo.t, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
}

// The library's version as it records it in a loaded topology (the API version lags it).
std::string hwloc_version(hwloc_topology_t t) {
  if (t)
    if (const char* v = hwloc_obj_get_info_by_name(hwloc_get_root_obj(t), "hwlocVersion")) return v;
  unsigned v = hwloc_get_api_version();
  return "API " + std::to_string(v >> 16) + "." + std::to_string((v >> 8) & 0xff);
}

}  // namespace

NodeGraph read_hwloc_file(const std::string& path) {
  Topology topo;
  prepare(topo);
  if (hwloc_topology_set_xml(topo.t, path.c_str()) != 0)
    fail(path + ": hwloc cannot use it as an XML topology");
  if (hwloc_topology_load(topo.t) != 0)
    fail(path + ": hwloc could not load it (not an hwloc 2.x export? hwloc " +
         hwloc_version(nullptr) + " reads <topology version=\"2.0\">)");
  NodeGraph g = Reader(topo.t, false).read();
  g.node.source = "hwloc XML " + path;
  finish_devices(g);
  return g;
}

NodeTopology load_hwloc_file(const std::string& path) {
  NodeGraph g = read_hwloc_file(path);
  compute_links(g);
  return std::move(g.node);
}

NodeTopology detect_live() {
  Topology topo;
  prepare(topo);
  if (hwloc_topology_load(topo.t) != 0) fail("hwloc could not detect this machine's topology");
  NodeGraph g = Reader(topo.t, true).read();
  g.node.source = "live (hwloc " + hwloc_version(topo.t) + ")";
  if (g.node.hostname.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    g.node.hostname = host;
  }
  // hwloc's own NVLink matrix needs its NVML plugin; when it is absent, ask NVML directly.
  if (!g.node.nvlink_known)
    if (auto report = query_nvml()) apply_nvml(g, *report);
  finish_devices(g);
  compute_links(g);
  STRATA_LOG(INFO, "TOPO") << "node " << g.node.hostname << ": " << g.node.numa.size()
                           << " NUMA nodes, " << g.node.cores << " cores, "
                           << g.node.of_kind(DeviceKind::gpu).size() << " GPUs, "
                           << g.node.of_kind(DeviceKind::nic).size() << " NICs";
  return std::move(g.node);
}

}  // namespace strata::topo
