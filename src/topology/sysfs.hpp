// What Linux's sysfs says of a NIC that hwloc does not: its rate, port state and link layer.
#pragma once

#include <string>

#include "strata/topology.hpp"

namespace strata::topo {

struct NicSysfs {
  double rate_gbps = 0;  ///< 0 when unknown
  PortState port = PortState::unknown;
  std::string link_layer;  ///< RDMA devices: "InfiniBand" or "Ethernet"
};

/// RDMA device `name`: <root>/class/infiniband/<name>/ports/1/{rate,state,link_layer}.
NicSysfs read_rdma_sysfs(const std::string& root, const std::string& name);
/// Network interface `name`: <root>/class/net/<name>/{speed,operstate}.
NicSysfs read_netdev_sysfs(const std::string& root, const std::string& name);

}  // namespace strata::topo
