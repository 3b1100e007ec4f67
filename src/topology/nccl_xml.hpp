// Nodes described in NCCL's topology format (<system version="1">, what NCCL_TOPO_DUMP_FILE
// writes and NCCL_TOPO_FILE reads): <cpu> NUMA domains holding nested <pci> switches and devices,
// <gpu> with <nvlink> children, and <nic> with <net> children.
#pragma once

#include <string>
#include <string_view>

#include "strata/topology.hpp"
#include "topology/graph.hpp"

namespace strata::topo {

/// The graph of an NCCL topology document; `source` names it in errors.
NodeGraph read_nccl_xml(std::string_view text, const std::string& source);
/// read_nccl_xml with its links computed.
NodeTopology load_nccl_xml(std::string_view text, const std::string& source);

}  // namespace strata::topo
