#include "topology/nccl_xml.hpp"

#include <charconv>
#include <map>

#include "base/log.hpp"
#include "topology/cpuset.hpp"
#include "topology/errors.hpp"
#include "topology/estimates.hpp"
#include "topology/xml.hpp"

namespace strata::topo {
namespace {

constexpr unsigned kVendorNvidia = 0x10de, kVendorAmazon = 0x1d0f;

// NVLink elements are resolved once every device is known.
struct PendingNvlink {
  size_t gpu;
  std::string target;
  unsigned tclass;
  int count;
  double per_link;
  int line;
};

class Reader {
 public:
  explicit Reader(const std::string& source) : source_(source) {}

  NodeGraph read(const XmlElement& root) {
    if (root.name != "system")
      fail(where(root) + "root element is <" + root.name + ">, not <system>");
    if (root.get("version", "1") != "1") {
      STRATA_LOG(WARN, "TOPO") << source_ << ": NCCL topology version " << root.get("version")
                               << " (Strata knows version 1); reading it anyway";
    }
    CpuSet all;
    for (const XmlElement& cpu : root.children) {
      if (cpu.name != "cpu") continue;
      read_cpu(cpu);
      CpuSet s;
      CpuSet::parse_list(g_.node.numa.back().cpus, s);
      all |= s;
    }
    if (g_.node.numa.empty()) fail(where(root) + "<system> has no <cpu> element");
    g_.node.pus = int(all.count());
    resolve_nvlinks();
    finish_devices(g_);
    return std::move(g_);
  }

 private:
  void read_cpu(const XmlElement& e) {
    NumaNode numa;
    numa.os_index = int_attr(e, "numaid", int(g_.node.numa.size()));
    for (const NumaNode& other : g_.node.numa)
      if (other.os_index == numa.os_index)
        fail(where(e) + "two <cpu> elements with numaid " + std::to_string(numa.os_index));
    if (const std::string* mask = e.find("affinity")) {
      CpuSet cpus;
      if (!CpuSet::parse_mask(*mask, cpus)) fail(where(e) + "bad affinity mask '" + *mask + "'");
      numa.cpus = cpus.to_list();
    }
    g_.node.numa.push_back(numa);
    if (g_.cpu.vendor.empty()) {
      g_.cpu.arch = e.get("arch");
      g_.cpu.vendor = e.get("vendor");
      g_.cpu.family = int_attr(e, "familyid", -1);
      g_.cpu.model = int_attr(e, "modelid", -1);
    }
    Device cpu;
    cpu.kind = DeviceKind::cpu;
    cpu.index = cpu.numa = numa.os_index;
    cpu.cpus = numa.cpus;
    g_.add_device(std::move(cpu), -1);
    for (const XmlElement& c : e.children) read_child(c, -1, numa);
  }

  void read_child(const XmlElement& e, int parent, const NumaNode& numa) {
    if (e.name == "pci") {
      read_pci(e, parent, numa);
    } else if (e.name == "nic") {
      // A NIC NCCL found no PCI device for (a virtual interface): it hangs off the CPU.
      Device d = nic_device(e, numa);
      d.nic_kind = kind_from_name(d.name);
      g_.add_device(std::move(d), -1);
    }
  }

  void read_pci(const XmlElement& e, int parent, const NumaNode& numa) {
    const unsigned cls = hex_attr(e, "class");
    const unsigned vendor = hex_attr(e, "vendor"), device = hex_attr(e, "device");
    PciNode node;
    node.parent = parent;
    node.numa = parent < 0 ? numa.os_index : -1;
    const bool bridge = (cls >> 8) == 0x0604;
    // NCCL already folds each PCIe switch into one <pci> element.
    if (bridge) node.pcie_switch = next_switch_++;
    g_.pci.push_back(node);
    const int self = int(g_.pci.size() - 1);
    if (bridge) {
      for (const XmlElement& c : e.children) read_child(c, self, numa);
      return;
    }
    Device d;
    d.pci_bus_id = normalize_bus_id(e.get("busid"));
    if (d.pci_bus_id.empty()) fail(where(e) + "<pci> without a valid busid");
    d.numa = numa.os_index;
    d.cpus = numa.cpus;
    d.pcie_gbs = pcie_gbs(leading_number(e.get("link_speed")), int_attr(e, "link_width", 0));
    const unsigned base = cls >> 16;
    if (vendor == kVendorNvidia && (cls >> 8) == 0x0680) {
      d.kind = DeviceKind::nvswitch;
      g_.add_device(std::move(d), self);
    } else if (base == 0x03) {
      d.kind = DeviceKind::gpu;
      size_t index = g_.add_device(std::move(d), self);
      for (const XmlElement& c : e.children)
        if (c.name == "gpu") read_gpu(c, index);
    } else if (base == 0x02) {
      Device nic = d;
      for (const XmlElement& c : e.children) {
        if (c.name != "nic") continue;
        nic = nic_device(c, numa);
        nic.pci_bus_id = d.pci_bus_id;
        nic.pcie_gbs = d.pcie_gbs;
      }
      nic.kind = DeviceKind::nic;
      if (vendor == kVendorAmazon && (device & 0xfff0) == 0xefa0)
        nic.nic_kind = NicKind::efa;
      else if ((cls >> 8) == 0x0207)
        nic.nic_kind = NicKind::infiniband;
      else if ((cls >> 8) == 0x0208)
        nic.nic_kind = NicKind::omnipath;
      else
        nic.nic_kind = kind_from_name(nic.name);
      g_.add_device(std::move(nic), self);
    }
  }

  // <gpu dev sm rank gdr> and its <nvlink target count tclass> children.
  void read_gpu(const XmlElement& e, size_t gpu) {
    g_.node.nvlink_known = true;
    int sm = int_attr(e, "sm", 0);
    double per_link = nvlink_per_link_gbs(sm / 10, sm % 10);
    for (const XmlElement& l : e.children) {
      if (l.name != "nvlink") continue;
      pending_.push_back({gpu, normalize_bus_id(l.get("target")), hex_attr(l, "tclass"),
                          int_attr(l, "count", 1), per_link, l.line});
    }
  }

  void resolve_nvlinks() {
    std::map<std::string, size_t> by_bus;
    for (size_t i = 0; i < g_.node.devices.size(); ++i)
      if (!g_.node.devices[i].pci_bus_id.empty()) by_bus[g_.node.devices[i].pci_bus_id] = i;
    for (const PendingNvlink& p : pending_) {
      const Device& gpu = g_.node.devices[p.gpu];
      if (p.target == gpu.pci_bus_id) {
        STRATA_LOG(INFO, "TOPO") << source_ << ": line " << p.line << ": " << gpu.pci_bus_id
                                 << " has an NVLink to itself; ignored";
        continue;
      }
      int to = -1;
      if ((p.tclass >> 8) == 0x0680) {  // NVSwitch: NCCL gives each a made-up bus id
        auto it = by_bus.find(p.target);
        if (it == by_bus.end()) {
          Device sw;
          sw.kind = DeviceKind::nvswitch;
          sw.pci_bus_id = p.target;
          it = by_bus.emplace(p.target, g_.add_device(std::move(sw), -1)).first;
        }
        to = int(it->second);
      } else if ((p.tclass >> 16) == 0x03) {
        auto it = by_bus.find(p.target);
        if (it == by_bus.end()) {
          STRATA_LOG(WARN, "TOPO") << source_ << ": line " << p.line << ": NVLink to unknown GPU "
                                   << p.target << "; ignored";
          continue;
        }
        to = int(it->second);
      } else {
        to = g_.node.cpu(gpu.numa);  // a CPU (POWER NPU) link
      }
      if (to >= 0) g_.fabric.push_back({int(p.gpu), to, p.count * p.per_link});
    }
  }

  Device nic_device(const XmlElement& nic, const NumaNode& numa) {
    Device d;
    d.kind = DeviceKind::nic;
    d.numa = numa.os_index;
    d.cpus = numa.cpus;
    for (const XmlElement& net : nic.children) {
      if (net.name != "net") continue;
      std::string name = net.get("name");
      if (d.name.empty()) {
        d.name = name;
        d.rate_gbps = leading_number(net.get("speed")) / 1000.0;  // NCCL writes Mb/s
      } else if (!name.empty()) {
        d.os_names.push_back(name);
      }
    }
    return d;
  }

  static NicKind kind_from_name(const std::string& n) {
    if (n.starts_with("mlx")) return NicKind::infiniband;
    if (n.starts_with("rdmap") || n.starts_with("efa")) return NicKind::efa;
    if (n.starts_with("hfi")) return NicKind::omnipath;
    if (n.starts_with("ib")) return NicKind::infiniband;  // IPoIB
    if (n.starts_with("eth") || n.starts_with("en")) return NicKind::ethernet;
    return NicKind::unknown;
  }

  static double leading_number(const std::string& s) {
    double v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    (void)p;
    return ec == std::errc() ? v : 0;
  }

  int int_attr(const XmlElement& e, std::string_view key, int fallback) const {
    const std::string* v = e.find(key);
    if (!v || v->empty()) return fallback;
    int out = 0;
    auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
    if (ec != std::errc() || p != v->data() + v->size())
      fail(where(e) + "attribute " + std::string(key) + "=\"" + *v + "\" is not an integer");
    return out;
  }

  unsigned hex_attr(const XmlElement& e, std::string_view key) const {
    std::string v = e.get(key);
    if (v.empty()) return 0;
    std::string_view digits = v;
    if (digits.starts_with("0x") || digits.starts_with("0X")) digits.remove_prefix(2);
    unsigned out = 0;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out, 16);
    if (ec != std::errc() || p != digits.data() + digits.size())
      fail(where(e) + "attribute " + std::string(key) + "=\"" + v + "\" is not a hex number");
    return out;
  }

  std::string where(const XmlElement& e) const {
    return source_ + ": line " + std::to_string(e.line) + ": ";
  }

  const std::string& source_;
  NodeGraph g_;
  std::vector<PendingNvlink> pending_;
  int next_switch_ = 0;
};

}  // namespace

NodeGraph read_nccl_xml(std::string_view text, const std::string& source) {
  XmlElement root = parse_xml(text, source);
  NodeGraph g = Reader(source).read(root);
  g.node.source = "NCCL XML " + source;
  return g;
}

NodeTopology load_nccl_xml(std::string_view text, const std::string& source) {
  NodeGraph g = read_nccl_xml(text, source);
  compute_links(g);
  return std::move(g.node);
}

}  // namespace strata::topo
