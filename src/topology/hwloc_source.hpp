// Nodes seen through hwloc 2.x: the live machine, or an hwloc XML export.
#pragma once

#include <string>

#include "strata/topology.hpp"
#include "topology/graph.hpp"

namespace strata::topo {

/// The graph of an hwloc XML file, devices numbered, links not yet computed.
NodeGraph read_hwloc_file(const std::string& path);
/// read_hwloc_file with its links computed.
NodeTopology load_hwloc_file(const std::string& path);
/// This machine: hwloc, NIC rates and port states from sysfs, NVLink from NVML when present.
NodeTopology detect_live();

}  // namespace strata::topo
