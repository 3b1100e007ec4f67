#include "topology/graph.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <numeric>

namespace strata::topo {

size_t NodeGraph::add_device(Device d, int pci_node) {
  node.devices.push_back(std::move(d));
  device_pci.push_back(pci_node);
  return node.devices.size() - 1;
}

std::string normalize_bus_id(std::string_view id) {
  // [domain:]bus:device.function, all hex; NVML writes an 8-digit upper-case domain.
  auto hex = [](std::string_view s, unsigned& v) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
    return !s.empty() && ec == std::errc() && p == s.data() + s.size();
  };
  size_t dot = id.rfind('.');
  size_t c2 = id.rfind(':');
  if (dot == std::string_view::npos || c2 == std::string_view::npos || c2 > dot) return "";
  size_t c1 = id.rfind(':', c2 - 1);
  if (c2 == 0) c1 = std::string_view::npos;
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  std::string_view dom = c1 == std::string_view::npos ? "0" : id.substr(0, c1);
  std::string_view b = id.substr(c1 == std::string_view::npos ? 0 : c1 + 1,
                                 c2 - (c1 == std::string_view::npos ? 0 : c1 + 1));
  if (!hex(dom, domain) || !hex(b, bus) || !hex(id.substr(c2 + 1, dot - c2 - 1), dev) ||
      !hex(id.substr(dot + 1), fn) || bus > 0xff || dev > 0x1f || fn > 7)
    return "";
  char out[32];
  std::snprintf(out, sizeof out, domain > 0xffff ? "%08x:%02x:%02x.%x" : "%04x:%02x:%02x.%x",
                domain, bus, dev, fn);
  return out;
}

void finish_devices(NodeGraph& g) {
  auto& devs = g.node.devices;
  std::vector<size_t> order(devs.size());
  std::iota(order.begin(), order.end(), 0);
  // cpus (by NUMA index), then gpus, nics and nvswitches in PCI bus order; devices without a bus
  // id keep their reading order after those that have one.
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    const Device& a = devs[x];
    const Device& b = devs[y];
    if (a.kind != b.kind) return a.kind < b.kind;
    if (a.kind == DeviceKind::cpu) return a.index < b.index;
    if (a.pci_bus_id.empty() != b.pci_bus_id.empty()) return b.pci_bus_id.empty();
    return a.pci_bus_id < b.pci_bus_id;
  });
  std::vector<int> new_index(devs.size());
  std::vector<Device> sorted;
  std::vector<int> sorted_pci;
  for (size_t i = 0; i < order.size(); ++i) {
    new_index[order[i]] = int(i);
    sorted.push_back(std::move(devs[order[i]]));
    sorted_pci.push_back(g.device_pci[order[i]]);
  }
  devs = std::move(sorted);
  g.device_pci = std::move(sorted_pci);
  for (auto& f : g.fabric) {
    f.a = new_index[f.a];
    f.b = new_index[f.b];
  }
  int counts[4] = {0, 0, 0, 0};
  for (Device& d : devs) {
    int n = counts[int(d.kind)]++;
    switch (d.kind) {
      case DeviceKind::cpu:
        if (d.name.empty()) d.name = "CPU" + std::to_string(d.index);
        break;
      case DeviceKind::gpu:
        d.index = n;
        d.name = "GPU" + std::to_string(n);
        break;
      case DeviceKind::nic:
        d.index = n;
        if (d.name.empty()) d.name = "NIC" + std::to_string(n);
        break;
      case DeviceKind::nvswitch:
        d.index = n;
        d.name = "NVSwitch" + std::to_string(n);
        break;
    }
  }
}

}  // namespace strata::topo
