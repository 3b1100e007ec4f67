#include "topology/nvml.hpp"

#include <dlfcn.h>

#include <map>
#include <mutex>

#include "base/log.hpp"
#include "topology/estimates.hpp"

namespace strata::topo {
namespace {

// The few NVML declarations used, written from the NVML API reference (nvml.h is not needed to
// build). nvmlPciInfo_t is the layout of the _v3 / _v2 query functions named below.
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr unsigned kNvlinkMaxLinks = 18;
constexpr unsigned kRemoteGpu = 0, kRemoteIbmNpu = 1, kRemoteSwitch = 2;

struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pciDeviceId;
  unsigned pciSubSystemId;
  char busId[32];
};

struct Api {
  void* lib = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*handle)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*cc)(nvmlDevice_t, int*, int*) = nullptr;
  nvmlReturn_t (*link_state)(nvmlDevice_t, unsigned, unsigned*) = nullptr;
  nvmlReturn_t (*remote_pci)(nvmlDevice_t, unsigned, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*remote_type)(nvmlDevice_t, unsigned, unsigned*) = nullptr;  // newer drivers
};

template <typename F>
void bind(void* lib, const char* symbol, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, symbol));
}

// Loads and initialises NVML; says why not once per process.
bool load(Api& api) {
  static std::once_flag said;
  auto tell = [&](const std::string& why) {
    std::call_once(said, [&] { STRATA_LOG(INFO, "TOPO") << why << ": no NVLink information"; });
  };
  api.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!api.lib) {
    tell("no NVIDIA driver (libnvidia-ml.so.1 not found)");
    return false;
  }
  bind(api.lib, "nvmlInit_v2", api.init);
  bind(api.lib, "nvmlShutdown", api.shutdown);
  bind(api.lib, "nvmlDeviceGetCount_v2", api.count);
  bind(api.lib, "nvmlDeviceGetHandleByIndex_v2", api.handle);
  bind(api.lib, "nvmlDeviceGetPciInfo_v3", api.pci);
  bind(api.lib, "nvmlDeviceGetName", api.name);
  bind(api.lib, "nvmlDeviceGetUUID", api.uuid);
  bind(api.lib, "nvmlDeviceGetCudaComputeCapability", api.cc);
  bind(api.lib, "nvmlDeviceGetNvLinkState", api.link_state);
  bind(api.lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", api.remote_pci);
  bind(api.lib, "nvmlDeviceGetNvLinkRemoteDeviceType", api.remote_type);
  if (!api.init || !api.shutdown || !api.count || !api.handle || !api.pci) {
    tell("libnvidia-ml.so.1 lacks the functions Strata needs");
    dlclose(api.lib);
    return false;
  }
  if (api.init() != kNvmlSuccess) {
    tell("NVML did not initialise");
    dlclose(api.lib);
    return false;
  }
  return true;
}

void read_links(const Api& api, nvmlDevice_t dev, const std::string& bus_id, NvmlReport& out) {
  if (!api.link_state || !api.remote_pci) return;
  int major = 0, minor = 0;
  if (api.cc) api.cc(dev, &major, &minor);
  const double per_link = nvlink_per_link_gbs(major, minor);
  for (unsigned link = 0; link < kNvlinkMaxLinks; ++link) {
    unsigned active = 0;
    if (api.link_state(dev, link, &active) != kNvmlSuccess || !active) continue;
    nvmlPciInfo_t remote{};
    if (api.remote_pci(dev, link, &remote) != kNvmlSuccess) continue;
    NvmlLink l;
    l.gpu_bus_id = bus_id;
    l.remote_bus_id = normalize_bus_id(remote.busId);
    l.gbs = per_link;
    unsigned type = kRemoteGpu;
    if (api.remote_type && api.remote_type(dev, link, &type) == kNvmlSuccess) {
      l.remote = type == kRemoteSwitch   ? NvmlLink::Remote::nvswitch
                 : type == kRemoteIbmNpu ? NvmlLink::Remote::cpu
                                         : NvmlLink::Remote::gpu;
    } else {
      // Older drivers: a remote that is no GPU of ours is taken as a switch (resolved later).
      l.remote = NvmlLink::Remote::gpu;
    }
    out.links.push_back(l);
  }
}

}  // namespace

std::optional<NvmlReport> query_nvml() {
  Api api;
  if (!load(api)) return std::nullopt;
  NvmlReport out;
  unsigned n = 0;
  if (api.count(&n) == kNvmlSuccess) {
    for (unsigned i = 0; i < n; ++i) {
      nvmlDevice_t dev = nullptr;
      nvmlPciInfo_t pci{};
      if (api.handle(i, &dev) != kNvmlSuccess || api.pci(dev, &pci) != kNvmlSuccess) continue;
      NvmlGpu gpu;
      gpu.bus_id = normalize_bus_id(pci.busId);
      char text[96] = {};
      if (api.name && api.name(dev, text, sizeof text) == kNvmlSuccess) gpu.model = text;
      char id[96] = {};
      if (api.uuid && api.uuid(dev, id, sizeof id) == kNvmlSuccess) gpu.uuid = id;
      read_links(api, dev, gpu.bus_id, out);
      out.gpus.push_back(gpu);
    }
  }
  api.shutdown();
  dlclose(api.lib);
  STRATA_LOG(INFO, "TOPO") << "NVML: " << out.gpus.size() << " GPUs, " << out.links.size()
                           << " active NVLinks";
  return out;
}

void apply_nvml(NodeGraph& g, const NvmlReport& report) {
  auto& devs = g.node.devices;
  std::map<std::string, size_t> by_bus;
  for (size_t i = 0; i < devs.size(); ++i)
    if (!devs[i].pci_bus_id.empty()) by_bus[devs[i].pci_bus_id] = i;
  for (const NvmlGpu& gpu : report.gpus) {
    auto it = by_bus.find(gpu.bus_id);
    if (it == by_bus.end()) {
      // A GPU hwloc did not see (a container hiding /sys): attach it nowhere in particular.
      Device d;
      d.kind = DeviceKind::gpu;
      d.pci_bus_id = gpu.bus_id;
      it = by_bus.emplace(gpu.bus_id, g.add_device(std::move(d), -1)).first;
    }
    Device& d = devs[it->second];
    d.kind = DeviceKind::gpu;
    if (!gpu.model.empty()) d.model = gpu.model;
    if (!gpu.uuid.empty()) d.uuid = gpu.uuid;
  }
  // One edge per link; the path computation sums parallel links.
  for (const NvmlLink& l : report.links) {
    auto from = by_bus.find(l.gpu_bus_id);
    if (from == by_bus.end()) continue;
    int to = -1;
    auto remote = by_bus.find(l.remote_bus_id);
    if (l.remote == NvmlLink::Remote::cpu) {
      to = g.node.cpu(devs[from->second].numa);
    } else if (remote != by_bus.end() && devs[remote->second].kind == DeviceKind::gpu) {
      to = int(remote->second);
    } else if (l.remote == NvmlLink::Remote::nvswitch || remote == by_bus.end() ||
               devs[remote->second].kind == DeviceKind::nvswitch) {
      if (remote == by_bus.end()) {
        Device sw;
        sw.kind = DeviceKind::nvswitch;
        sw.pci_bus_id = l.remote_bus_id;
        remote = by_bus.emplace(l.remote_bus_id, g.add_device(std::move(sw), -1)).first;
      }
      devs[remote->second].kind = DeviceKind::nvswitch;
      to = int(remote->second);
    }
    if (to >= 0) g.fabric.push_back({int(from->second), to, l.gbs});
  }
  g.node.nvlink_known = true;
}

}  // namespace strata::topo
