// The numbers behind every Link: per-class latencies, PCIe and NVLink rates, socket interconnects
// and NIC defaults. They are relative figures for the cost model; docs/topology.md gives the
// source of each.
#pragma once

#include <string_view>

#include "strata/topology.hpp"
#include "topology/graph.hpp"

namespace strata::topo {

constexpr double kPcieGen3x16Gbs = 15.75;  ///< 8 GT/s x 16 lanes x 128/130 / 8 bits
constexpr double kGpuLocalGbs = 1000;      ///< a copy inside one GPU's memory (HBM class)
constexpr double kHostCopyGbs = 10;        ///< one-thread memcpy between processes of a NUMA node
constexpr double kHostLatencyUs = 0.5;     ///< hand-off through shared memory on one NUMA node

/// Bandwidth (GB/s) of a PCIe link of `gts` GT/s per lane and `width` lanes.
double pcie_gbs(double gts, int width);

/// Bandwidth (GB/s) a GPU-to-GPU transfer gets across the socket interconnect of these CPUs.
double inter_socket_gbs(const CpuInfo& cpu);

/// Bandwidth (GB/s, one direction) of one NVLink of a GPU with compute capability major.minor.
double nvlink_per_link_gbs(int major, int minor);

/// Latency (us) of a small message over a path of class `c` inside a node.
double class_latency_us(PathClass c);

/// A NIC's rate in Gb/s when it does not report one.
double default_nic_rate_gbps(NicKind k);
/// Latency (us) of a small message between nodes through NICs of kind `k`.
double nic_latency_us(NicKind k);
/// RDMA-capable (InfiniBand, RoCE, Omni-Path, EFA) rather than plain Ethernet.
bool is_rdma(NicKind k);
/// A rank's way off its node through NIC `nic` of `node` (its rate, or the default for its
/// kind); no such NIC: plain Ethernet figures.
Link nic_link(const NodeTopology& node, std::string_view nic);

/// A device's path to itself (LOC): its memory for GPUs, a host copy for CPUs, its rate for NICs.
Link self_link(const Device& d);

/// The estimate for class `c` when nothing more specific is known (a dump that names a class
/// and no figures).
Link default_link(PathClass c);

}  // namespace strata::topo
