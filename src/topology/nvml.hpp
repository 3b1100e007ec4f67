// NVIDIA GPUs and their NVLinks as the driver reports them, through NVML loaded with dlopen at run
// time: Strata never links libnvidia-ml, and a machine without the driver has no NVLink info.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "topology/graph.hpp"

namespace strata::topo {

struct NvmlGpu {
  std::string bus_id;  ///< normalized ("0000:3b:00.0")
  std::string model;
  std::string uuid;
};

struct NvmlLink {
  enum class Remote { gpu, nvswitch, cpu };
  std::string gpu_bus_id;     ///< the GPU whose link this is
  std::string remote_bus_id;  ///< the other end's PCI id as NVML gives it (normalized)
  Remote remote = Remote::gpu;
  double gbs = 0;  ///< one link's bandwidth, one direction
};

struct NvmlReport {
  std::vector<NvmlGpu> gpus;
  std::vector<NvmlLink> links;  ///< one entry per active link
};

/// What NVML reports, or nothing when libnvidia-ml.so.1 cannot be loaded or initialised (said
/// once, at INFO).
std::optional<NvmlReport> query_nvml();

/// Adds the report to a graph read from hwloc: GPUs hwloc missed, NVSwitches it cannot see (they
/// are not PCI devices on HGX boards), and the NVLink edges. Call before finish_devices.
void apply_nvml(NodeGraph& g, const NvmlReport& report);

}  // namespace strata::topo
