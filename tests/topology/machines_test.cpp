// Topology detection against real machines' descriptions, hwloc and NCCL XML: device counts,
// path classes between chosen pairs, NIC choice.
#include <gtest/gtest.h>

#include "topology/graph.hpp"
#include "topology/hwloc_source.hpp"
#include "topology_fixtures.hpp"

using namespace topo_test;

// DGX-2: 16 V100 on 12 NVSwitches; every GPU pair goes through the switches at 6 x 25 GB/s.
TEST(Dgx2, SixteenGpusTwelveNvswitchesEveryPairThroughSwitches) {
  const NodeTopology& n = dgx2();
  EXPECT_EQ(count(n, DeviceKind::gpu), 16u);
  EXPECT_EQ(count(n, DeviceKind::nvswitch), 12u);
  EXPECT_EQ(n.numa.size(), 2u);
  EXPECT_TRUE(n.nvlink_known);
  for (size_t a : n.of_kind(DeviceKind::gpu)) {
    for (size_t b : n.of_kind(DeviceKind::gpu)) {
      if (a == b) continue;
      EXPECT_EQ(n.link(a, b).cls, PathClass::nvb) << n.devices[a].name << "-" << n.devices[b].name;
      EXPECT_DOUBLE_EQ(n.link(a, b).bandwidth_gbs, 150.0);
    }
  }
  EXPECT_EQ(cls(n, "GPU0", "GPU0"), PathClass::loc);
  EXPECT_EQ(n.devices[dev(n, "GPU0")].model, "Tesla V100-SXM3-32GB-H");
  EXPECT_EQ(nic_of(n, "GPU0"), "");  // the trimmed export kept no NIC
}

// Under the NVLink, the PCIe tree: two GPUs per leaf switch, leaves under one switch per host
// bridge, two host bridges per socket.
TEST(Dgx2, PcieClassesBelowTheNvlink) {
  topo::NodeGraph g = topo::read_hwloc_file(data("hwloc/nvidia-dgx2h-16xV100-nvswitch.xml"));
  const NodeTopology& n = g.node;
  EXPECT_EQ(topo::pcie_class(g, dev(n, "GPU0"), dev(n, "GPU1")), PathClass::pix);
  EXPECT_EQ(topo::pcie_class(g, dev(n, "GPU0"), dev(n, "GPU2")), PathClass::pxb);
  EXPECT_EQ(topo::pcie_class(g, dev(n, "GPU0"), dev(n, "GPU4")), PathClass::phb);
  EXPECT_EQ(topo::pcie_class(g, dev(n, "GPU0"), dev(n, "GPU8")), PathClass::sys);
  EXPECT_EQ(topo::pcie_class(g, dev(n, "GPU0"), dev(n, "CPU0")), PathClass::phb);
  EXPECT_EQ(topo::pcie_class(g, dev(n, "GPU0"), dev(n, "CPU1")), PathClass::sys);
}

// POWER8 "Minsky": NVLink between GPUs 0-1 and 2-3 (2 links, 40 GB/s) and from each GPU to its
// own socket; the other pairs cross the X-Bus.
TEST(Power8, NvlinkPairsAndGpuToCpuLinks) {
  const NodeTopology& n = power8();
  EXPECT_EQ(count(n, DeviceKind::gpu), 4u);
  EXPECT_EQ(count(n, DeviceKind::nic), 0u);
  EXPECT_EQ(cls(n, "GPU0", "GPU1"), PathClass::nvl);
  EXPECT_EQ(cls(n, "GPU2", "GPU3"), PathClass::nvl);
  EXPECT_DOUBLE_EQ(n.link(dev(n, "GPU0"), dev(n, "GPU1")).bandwidth_gbs, 40.0);
  EXPECT_EQ(cls(n, "GPU0", "GPU2"), PathClass::sys);
  EXPECT_EQ(cls(n, "GPU1", "GPU3"), PathClass::sys);
  EXPECT_EQ(cls(n, "GPU0", "CPU0"), PathClass::nvl);
  EXPECT_EQ(cls(n, "GPU1", "CPU0"), PathClass::nvl);
  EXPECT_EQ(cls(n, "GPU2", "CPU1"), PathClass::nvl);
  EXPECT_EQ(cls(n, "GPU0", "CPU1"), PathClass::sys);
  // Each GPU is seen three times (cuda, opencl, nvml OS devices) but counted once.
  const Device& gpu0 = n.devices[dev(n, "GPU0")];
  EXPECT_EQ(gpu0.os_names, (std::vector<std::string>{"cuda0", "opencl0d0", "nvml0"}));
  EXPECT_EQ(gpu0.uuid, "GPU-77bf6b9a-6906-5a93-d28b-b77d2c23d1d2");
  EXPECT_EQ(gpu0.numa, 0);
}

// Lassen: 4 IB HCAs, two per socket; each GPU's nearest HCA is on its own socket, one per GPU.
TEST(Lassen, FourHcasTwoPerSocketEachGpuNearestOnItsSocket) {
  const NodeTopology& n = lassen();
  EXPECT_EQ(count(n, DeviceKind::gpu), 4u);
  EXPECT_EQ(count_nics(n, NicKind::infiniband), 4u);
  EXPECT_EQ(count_nics(n, NicKind::ethernet), 2u);
  EXPECT_FALSE(n.nvlink_known);  // physically there, not in the export
  EXPECT_EQ(n.cores, 40);
  EXPECT_EQ(n.pus, 160);
  int per_numa[2] = {0, 0};
  for (size_t i : n.of_kind(DeviceKind::nic)) {
    const Device& nic = n.devices[i];
    if (nic.nic_kind != NicKind::infiniband) continue;
    EXPECT_EQ(nic.port, PortState::active) << nic.name;
    ++per_numa[nic.numa == 0 ? 0 : 1];
  }
  EXPECT_EQ(per_numa[0], 2);
  EXPECT_EQ(per_numa[1], 2);
  std::set<std::string> chosen;
  for (size_t g : n.of_kind(DeviceKind::gpu)) {
    const Device& gpu = n.devices[g];
    ASSERT_GE(gpu.nearest_nic, 0);
    const Device& nic = n.devices[size_t(gpu.nearest_nic)];
    EXPECT_EQ(nic.nic_kind, NicKind::infiniband);
    EXPECT_EQ(nic.numa, gpu.numa) << gpu.name << " -> " << nic.name;
    EXPECT_EQ(n.link(g, size_t(gpu.nearest_nic)).cls, PathClass::phb);
    chosen.insert(nic.name);
  }
  EXPECT_EQ(chosen.size(), 4u);
  EXPECT_EQ(nic_of(n, "GPU0"), "mlx5_0");
  EXPECT_EQ(nic_of(n, "GPU3"), "mlx5_3");
  EXPECT_EQ(cls(n, "GPU0", "GPU1"), PathClass::pix);  // one PLX switch
  EXPECT_EQ(cls(n, "GPU0", "mlx5_2"), PathClass::sys);
  EXPECT_EQ(n.devices[dev(n, "mlx5_0")].os_names, std::vector<std::string>{"hsi0"});
}

// g4dn.metal: 8 T4 on PCIe only, an EFA NIC on socket 1 that every GPU uses.
TEST(G4dn, EightPcieOnlyGpusAndAnEfaNic) {
  const NodeTopology& n = g4dn();
  EXPECT_EQ(count(n, DeviceKind::gpu), 8u);
  EXPECT_EQ(count(n, DeviceKind::nvswitch), 0u);
  EXPECT_EQ(count_nics(n, NicKind::efa), 1u);
  EXPECT_EQ(count_nics(n, NicKind::ethernet), 1u);
  EXPECT_FALSE(n.nvlink_known);
  for (size_t a : n.of_kind(DeviceKind::gpu))
    for (size_t b : n.of_kind(DeviceKind::gpu))
      EXPECT_GE(n.link(a, b).cls, a == b ? PathClass::loc : PathClass::pix);
  EXPECT_EQ(cls(n, "GPU0", "GPU1"), PathClass::phb);  // two root ports of one host bridge
  EXPECT_EQ(cls(n, "GPU0", "GPU4"), PathClass::sys);
  EXPECT_EQ(cls(n, "GPU4", "rdmap197s0"), PathClass::phb);
  EXPECT_EQ(cls(n, "rdmap197s0", "eth0"), PathClass::pix);
  for (size_t g : n.of_kind(DeviceKind::gpu)) EXPECT_EQ(nic_of(n, n.devices[g].name), "rdmap197s0");
  // SYS is bounded by Skylake's UPI (10 GB/s), PHB by the T4's PCIe gen3 x16.
  EXPECT_DOUBLE_EQ(n.link(dev(n, "GPU0"), dev(n, "GPU4")).bandwidth_gbs, 10.0);
  EXPECT_DOUBLE_EQ(n.link(dev(n, "GPU0"), dev(n, "GPU1")).bandwidth_gbs, 15.75);
}

// Quartz: two NUMA nodes, no GPU, an Omni-Path HFI on socket 1.
TEST(Quartz, TwoNumaNodesAndNoGpu) {
  const NodeTopology& n = quartz();
  EXPECT_EQ(n.numa.size(), 2u);
  EXPECT_EQ(count(n, DeviceKind::gpu), 0u);
  EXPECT_EQ(n.cores, 36);
  EXPECT_EQ(n.numa_distance, (std::vector<uint32_t>{10, 21, 21, 10}));
  EXPECT_EQ(n.numa[1].cpus, "18-35");
  EXPECT_EQ(n.numa[1].package, 1);
  EXPECT_EQ(count_nics(n, NicKind::omnipath), 1u);
  EXPECT_EQ(cls(n, "CPU0", "CPU1"), PathClass::sys);
  EXPECT_EQ(nic_of(n, "CPU0"), "hfi1_0");  // RDMA first, even across the sockets
  EXPECT_EQ(n.devices[size_t(n.nearest_nic("0-17"))].name, "hfi1_0");
  EXPECT_EQ(cls(n, "CPU1", "hfi1_0"), PathClass::phb);
}

// The Supermicro box: GPUs found by PCI class alone (NVIDIA and AMD, not the Matrox VGA), and
// the ConnectX-4 (mlx5_0 with its IPoIB interface ib0) as one NIC.
TEST(Supermicro, GpusFromPciClassAndOneIbNicWithItsNetdev) {
  const NodeTopology& n = fixture("hwloc/supermicro-2s-xeon-gpus-connectx4-ib.xml");
  EXPECT_EQ(count(n, DeviceKind::gpu), 4u);
  EXPECT_EQ(count(n, DeviceKind::nic), 3u);
  const Device& ib = n.devices[dev(n, "mlx5_0")];
  EXPECT_EQ(ib.nic_kind, NicKind::infiniband);
  EXPECT_EQ(ib.os_names, std::vector<std::string>{"ib0"});
  EXPECT_EQ(ib.numa, 1);
  EXPECT_EQ(n.devices[dev(n, "GPU2")].os_names, (std::vector<std::string>{"cuda0", "card0"}));
  EXPECT_EQ(nic_of(n, "GPU2"), "mlx5_0");
  EXPECT_EQ(cls(n, "GPU2", "mlx5_0"), PathClass::phb);
  EXPECT_EQ(cls(n, "GPU0", "mlx5_0"), PathClass::sys);
}

TEST(Laptop, OnePackageHybridCoresNoIo) {
  const NodeTopology& n = fixture("hwloc/laptop-intel-i7-1370P-raptorlake.xml");
  EXPECT_EQ(n.packages, 1);
  EXPECT_EQ(n.cores, 14);
  EXPECT_EQ(n.pus, 20);
  EXPECT_EQ(n.devices.size(), 1u);  // the CPU only
  EXPECT_EQ(n.devices[0].nearest_nic, -1);
}

// Azure ND A100 v4 (NCCL format): 4 NUMA domains, each with a switch holding 2 GPUs and 2 HCAs.
TEST(NcclXml, AzureNdv4GpusNicsAndNumaPlacement) {
  const NodeTopology& n = fixture("nccl/azure-ndv4-topo.xml");
  EXPECT_EQ(count(n, DeviceKind::gpu), 8u);
  EXPECT_EQ(count_nics(n, NicKind::infiniband), 8u);
  EXPECT_EQ(n.numa.size(), 4u);
  EXPECT_EQ(n.pus, 96);
  // GPUs are numbered in PCI bus order: GPU0 is 0001:00:00.0, on NUMA node 1.
  EXPECT_EQ(n.devices[dev(n, "GPU0")].pci_bus_id, "0001:00:00.0");
  EXPECT_EQ(n.devices[dev(n, "GPU0")].numa, 1);
  EXPECT_EQ(n.devices[dev(n, "GPU2")].numa, 0);
  EXPECT_EQ(n.devices[dev(n, "GPU6")].numa, 2);
  EXPECT_EQ(cls(n, "GPU0", "GPU1"), PathClass::pix);
  EXPECT_EQ(cls(n, "GPU0", "GPU2"), PathClass::sys);
  EXPECT_EQ(cls(n, "GPU0", "NIC0"), PathClass::pix);
  EXPECT_EQ(nic_of(n, "GPU0"), "NIC0");
  EXPECT_EQ(nic_of(n, "GPU1"), "NIC1");  // two HCAs per switch: one each
  EXPECT_DOUBLE_EQ(n.devices[dev(n, "GPU0")].pcie_gbs, 31.5076923076923);        // gen4 x16
  EXPECT_DOUBLE_EQ(n.link(dev(n, "GPU0"), dev(n, "GPU2")).bandwidth_gbs, 16.0);  // Zen 2
}

TEST(NcclXml, AzureNdv5OneGpuAndHcaPerSwitch) {
  const NodeTopology& n = fixture("nccl/azure-ndv5-topo.xml");
  EXPECT_EQ(count(n, DeviceKind::gpu), 8u);
  EXPECT_EQ(count_nics(n, NicKind::infiniband), 8u);
  EXPECT_EQ(n.numa.size(), 2u);
  EXPECT_EQ(n.devices[dev(n, "GPU3")].numa, 0);
  EXPECT_EQ(n.devices[dev(n, "GPU4")].numa, 1);
  EXPECT_EQ(cls(n, "GPU0", "NIC0"), PathClass::pix);
  EXPECT_EQ(cls(n, "GPU0", "GPU1"), PathClass::phb);
  EXPECT_EQ(cls(n, "GPU0", "GPU4"), PathClass::sys);
  for (int g = 0; g < 8; ++g)
    EXPECT_EQ(nic_of(n, "GPU" + std::to_string(g)), "NIC" + std::to_string(g));
}

// AWS p4d.24xlarge: a license comment before <system>, 4 EFA NICs each shared by 2 GPUs.
TEST(NcclXml, AwsP4dEightGpusFourEfa) {
  const NodeTopology& n = fixture("nccl/aws-p4d-24xl-topo.xml");
  EXPECT_EQ(count(n, DeviceKind::gpu), 8u);
  EXPECT_EQ(count_nics(n, NicKind::efa), 4u);
  EXPECT_EQ(n.numa.size(), 2u);
  EXPECT_EQ(n.devices[dev(n, "GPU4")].numa, 1);
  EXPECT_EQ(nic_of(n, "GPU0"), "NIC0");
  EXPECT_EQ(nic_of(n, "GPU1"), "NIC0");
  EXPECT_EQ(nic_of(n, "GPU7"), "NIC3");
  EXPECT_EQ(cls(n, "GPU0", "GPU1"), PathClass::pix);
  EXPECT_EQ(cls(n, "GPU0", "GPU2"), PathClass::phb);
}

// Azure NC A100 v4: one GPU per NUMA domain, an eth0 NIC with a speed, NVLink self-loops ignored.
TEST(NcclXml, AzureNcv4SelfLoopNvlinksIgnored) {
  const NodeTopology& n = fixture("nccl/azure-ncv4-topo.xml");
  EXPECT_EQ(count(n, DeviceKind::gpu), 4u);
  EXPECT_EQ(count(n, DeviceKind::nic), 1u);
  EXPECT_EQ(n.numa.size(), 4u);
  const Device& eth = n.devices[dev(n, "eth0")];
  EXPECT_EQ(eth.nic_kind, NicKind::ethernet);
  EXPECT_DOUBLE_EQ(eth.rate_gbps, 100.0);
  EXPECT_EQ(eth.numa, 0);
  for (int g = 1; g < 4; ++g) {
    EXPECT_EQ(cls(n, "GPU0", "GPU" + std::to_string(g)), PathClass::sys);
    EXPECT_EQ(n.devices[dev(n, "GPU" + std::to_string(g))].numa, g);
  }
}
