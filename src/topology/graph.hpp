// What a topology source (hwloc, NCCL's XML) hands to the path computation: the node's devices,
// the PCIe tree they hang in, and the NVLink edges between them. paths.cpp turns this into the
// NodeTopology's link matrix; the readers only describe what they saw.
#pragma once

#include <string>
#include <vector>

#include "strata/topology.hpp"

namespace strata::topo {

/// One node of the PCIe tree: a host bridge (with the root ports of its root complex), a port of
/// a PCIe switch, or a device.
struct PciNode {
  int parent = -1;       ///< index in NodeGraph::pci; -1 for a root, which hangs off `numa`
  int numa = -1;         ///< roots: OS index of the NUMA node they belong to (-1: whole machine)
  bool host = false;     ///< part of the root complex: a host bridge or one of its root ports
  int pcie_switch = -1;  ///< switch ports: id of the PCIe switch they belong to (one per switch)
};

/// A direct NVLink (or xGMI) connection, as total bandwidth over all its links.
struct FabricLink {
  int a = -1, b = -1;  ///< indexes in NodeTopology::devices
  double gbs = 0;      ///< GB/s, one direction
};

/// What the path computation needs to know about the CPUs: the socket interconnect's speed.
struct CpuInfo {
  std::string arch;    ///< "x86_64", "ppc64le", "aarch64"
  std::string vendor;  ///< "GenuineIntel", "AuthenticAMD", ...
  int family = -1, model = -1;
};

struct NodeGraph {
  NodeTopology node;  ///< everything but links and nearest NICs
  std::vector<PciNode> pci;
  std::vector<int> device_pci;  ///< per device: its PciNode, or -1 (hangs off its NUMA node)
  std::vector<FabricLink> fabric;
  CpuInfo cpu;

  /// Appends a device (and its slot in device_pci); returns its index.
  size_t add_device(Device d, int pci_node);
};

/// Adds the cpu devices (one per NUMA node, first in the list), sorts GPUs and NICs by PCI bus id
/// and numbers every kind. Call once the reader has added its devices; fabric links are remapped.
void finish_devices(NodeGraph& g);

/// Fills g.node.links and every cpu and gpu device's nearest NIC.
void compute_links(NodeGraph& g);

/// The class of the PCIe/CPU path between two devices, NVLink not considered (for tests and
/// for computing links).
PathClass pcie_class(const NodeGraph& g, size_t a, size_t b);

/// "0000:3b:00.0" from any PCI id spelling ("00000000:3B:00.0", "3b:00.0"); "" if not one.
std::string normalize_bus_id(std::string_view id);

}  // namespace strata::topo
