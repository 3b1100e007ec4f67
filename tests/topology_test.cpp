// Topology detection against real machines' descriptions (tests/data/topologies, see its
// README.md): device counts, path classes between chosen pairs, NIC choice, the dump format, the
// job view from a faked all-gather, and live detection on the machine running the test.
#include "strata/topology.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <barrier>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "strata/error.hpp"
#include "topology/cpuset.hpp"
#include "topology/dump.hpp"
#include "topology/graph.hpp"
#include "topology/hwloc_source.hpp"
#include "topology/placement.hpp"
#include "topology/sysfs.hpp"
#include "topology/xml.hpp"

using namespace strata;
namespace fs = std::filesystem;

namespace {

std::string data(const std::string& rel) { return std::string(STRATA_TOPO_DATA) + "/" + rel; }

// Every fixture is loaded once.
const NodeTopology& fixture(const std::string& rel) {
  static std::mutex mu;
  static std::map<std::string, NodeTopology> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(rel);
  if (it == cache.end()) it = cache.emplace(rel, load_node(data(rel))).first;
  return it->second;
}
const NodeTopology& dgx2() { return fixture("hwloc/nvidia-dgx2h-16xV100-nvswitch.xml"); }
const NodeTopology& power8() { return fixture("hwloc/ibm-power8-4xP100-nvlink.xml"); }
const NodeTopology& lassen() { return fixture("hwloc/llnl-lassen-power9-4xV100-4xIB.xml"); }
const NodeTopology& g4dn() { return fixture("hwloc/aws-g4dn-metal-8xT4-efa.xml"); }
const NodeTopology& quartz() { return fixture("hwloc/llnl-quartz-2s-broadwell-nogpu.xml"); }

size_t dev(const NodeTopology& n, const std::string& name) {
  int i = n.find(name);
  EXPECT_GE(i, 0) << "no device " << name;
  return i < 0 ? 0 : size_t(i);
}
PathClass cls(const NodeTopology& n, const std::string& a, const std::string& b) {
  return n.link(dev(n, a), dev(n, b)).cls;
}
std::string nic_of(const NodeTopology& n, const std::string& device) {
  int nic = n.devices[dev(n, device)].nearest_nic;
  return nic < 0 ? "" : n.devices[size_t(nic)].name;
}
size_t count(const NodeTopology& n, DeviceKind k) { return n.of_kind(k).size(); }
size_t count_nics(const NodeTopology& n, NicKind k) {
  size_t c = 0;
  for (size_t i : n.of_kind(DeviceKind::nic)) c += n.devices[i].nic_kind == k;
  return c;
}

// Runs `what` expecting strata::Error(invalid_argument) whose message holds every `needle`.
template <typename F>
void expect_invalid(F what, std::initializer_list<std::string> needles) {
  try {
    what();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

std::string temp_file(const std::string& name, const std::string& text) {
  fs::path p = fs::temp_directory_path() / ("strata_topo_" + std::to_string(getpid()) + "_" + name);
  std::ofstream(p) << text;
  return p.string();
}

}  // namespace

TEST(CpuSet, ParsesListsAndNcclMasks) {
  topo::CpuSet s;
  ASSERT_TRUE(topo::CpuSet::parse_list("0-3,8,10-11", s));
  EXPECT_EQ(s.count(), 7u);
  EXPECT_EQ(s.to_list(), "0-3,8,10-11");
  ASSERT_TRUE(topo::CpuSet::parse_mask("000000ff,ffff0000,00ffffff", s));
  EXPECT_EQ(s.to_list(), "0-23,48-71");
  EXPECT_FALSE(topo::CpuSet::parse_list("3-1", s));
  EXPECT_FALSE(topo::CpuSet::parse_mask("xyz", s));
  topo::CpuSet a, b;
  topo::CpuSet::parse_list("0-7", a);
  topo::CpuSet::parse_list("6-9", b);
  EXPECT_EQ((a & b).to_list(), "6-7");
  EXPECT_TRUE(a.intersects(b));
  EXPECT_FALSE(b.subset_of(a));
}

TEST(Xml, ReadsNestedElementsAttributesAndEntities) {
  auto root = topo::parse_xml(
      "<?xml version=\"1.0\"?>\n<!-- c --><!DOCTYPE x>\n<a k=\"1 &lt; 2\" q='&#65;'>\n"
      "  text <b/><!-- <c/> --><c x=\"&amp;\"></c>\n</a>\n",
      "mem");
  EXPECT_EQ(root.name, "a");
  EXPECT_EQ(root.get("k"), "1 < 2");
  EXPECT_EQ(root.get("q"), "A");
  ASSERT_EQ(root.children.size(), 2u);
  EXPECT_EQ(root.children[1].get("x"), "&");
  EXPECT_EQ(root.children[1].line, 4);
  EXPECT_EQ(topo::root_element_name("<!-- hi -->\n<system version=\"1\">"), "system");
}

TEST(Xml, ErrorsNameTheSourceAndLine) {
  expect_invalid([] { topo::parse_xml("<a>\n<b>\n</a>", "f.xml"); },
                 {"f.xml", "line 3", "tag mismatch: b line 2 and a"});
  expect_invalid([] { topo::parse_xml("<a k=1/>", "g.xml"); }, {"g.xml", "line 1", "AttValue"});
}

TEST(PathClass, NamesRoundTripInOrderBestFirst) {
  for (int c = 0; c <= int(PathClass::net); ++c)
    EXPECT_EQ(path_class_from_name(path_class_name(PathClass(c))), PathClass(c));
  EXPECT_EQ(path_class_from_name("nvb"), PathClass::nvb);
  EXPECT_LT(PathClass::nvl, PathClass::pix);
  EXPECT_LT(PathClass::phb, PathClass::sys);
  expect_invalid([] { path_class_from_name("FOO"); }, {"FOO"});
}

TEST(BusId, NormalizesNvmlAndShortForms) {
  EXPECT_EQ(topo::normalize_bus_id("00000000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(topo::normalize_bus_id("3b:00.1"), "0000:3b:00.1");
  EXPECT_EQ(topo::normalize_bus_id("0001:00:00.0"), "0001:00:00.0");
  EXPECT_EQ(topo::normalize_bus_id("nonsense"), "");
}

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

TEST(Load, BadFilesAreRejectedNamingTheFile) {
  expect_invalid([] { load_node("/nonexistent/topo.xml"); },
                 {"/nonexistent/topo.xml", "cannot open"});
  std::string other = temp_file("other.xml", "<foo/>");
  expect_invalid([&] { load_node(other); }, {other, "<foo>"});
  std::string v3 = temp_file("v3.xml", "<?xml version=\"1.0\"?>\n<topology version=\"3.0\"/>\n");
  expect_invalid([&] { load_node(v3); }, {v3, "hwloc"});
  std::string mask = temp_file(
      "mask.xml", "<system version=\"1\">\n  <cpu numaid=\"0\" affinity=\"zz\"/>\n</system>\n");
  expect_invalid([&] { load_node(mask); }, {mask, "line 2", "affinity"});
  std::string empty = temp_file("empty.xml", "<system version=\"1\"></system>");
  expect_invalid([&] { load_node(empty); }, {empty, "no <cpu>"});
  for (const auto& p : {other, v3, mask, empty}) fs::remove(p);
}

TEST(Dump, NodeRoundTripsThroughXml) {
  const NodeTopology& n = lassen();
  NodeTopology back = topo::read_node(topo::parse_xml(topo::node_xml(n), "mem"), "mem");
  ASSERT_EQ(back.devices.size(), n.devices.size());
  for (size_t i = 0; i < n.devices.size(); ++i) {
    EXPECT_EQ(back.devices[i].name, n.devices[i].name);
    EXPECT_EQ(back.devices[i].kind, n.devices[i].kind);
    EXPECT_EQ(back.devices[i].cpus, n.devices[i].cpus);
    EXPECT_EQ(back.devices[i].nearest_nic, n.devices[i].nearest_nic);
    EXPECT_EQ(back.devices[i].os_names, n.devices[i].os_names);
    for (size_t j = 0; j < n.devices.size(); ++j) {
      EXPECT_EQ(back.link(i, j).cls, n.link(i, j).cls);
      EXPECT_DOUBLE_EQ(back.link(i, j).bandwidth_gbs, n.link(i, j).bandwidth_gbs);
      EXPECT_DOUBLE_EQ(back.link(i, j).latency_us, n.link(i, j).latency_us);
    }
  }
  EXPECT_EQ(back.numa_distance, n.numa_distance);
  EXPECT_EQ(back.cores, n.cores);
  EXPECT_EQ(back.nvlink_known, n.nvlink_known);
}

// A person edits the dump: Lassen's GPUs do have NVLink (the export left it out).
TEST(Dump, EditedFileLoadsBackWithTheEdits) {
  JobTopology job = JobTopology::assemble({lassen()}, {});
  std::string text = job.to_xml();
  const std::string from = "<link a=\"GPU0\" b=\"GPU1\" class=\"PIX\"";
  size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos);
  size_t end = text.find("/>", at);
  text.replace(at, end - at, "<link a=\"GPU0\" b=\"GPU1\" class=\"NVL\" bw=\"150\"");
  std::string path = temp_file("edited.xml", text);
  NodeTopology n = load_node(path);  // one node: taken whatever this process's identity
  EXPECT_EQ(cls(n, "GPU0", "GPU1"), PathClass::nvl);
  EXPECT_DOUBLE_EQ(n.link(dev(n, "GPU1"), dev(n, "GPU0")).bandwidth_gbs, 150.0);
  EXPECT_EQ(cls(n, "GPU0", "GPU2"), PathClass::sys);
  fs::remove(path);
}

TEST(Dump, LeftOutLinksFollowNumaAndBadValuesNameTheLine) {
  std::string text =
      "<strata-topology version=\"1\">\n"
      "  <node id=\"n\">\n"
      "    <numa os_index=\"0\" cpus=\"0-3\"/>\n"
      "    <numa os_index=\"1\" cpus=\"4-7\"/>\n"
      "    <device name=\"GPU0\" kind=\"gpu\" index=\"0\" numa=\"0\"/>\n"
      "    <device name=\"GPU1\" kind=\"gpu\" index=\"1\" numa=\"0\"/>\n"
      "    <device name=\"GPU2\" kind=\"gpu\" index=\"2\" numa=\"1\"/>\n"
      "    <link a=\"GPU0\" b=\"GPU1\" class=\"nvl\"/>\n"
      "  </node>\n"
      "</strata-topology>\n";
  JobTopology job = JobTopology::from_xml(text, "hand.xml");
  const NodeTopology& n = job.nodes.at(0);
  EXPECT_EQ(cls(n, "GPU0", "GPU1"), PathClass::nvl);
  EXPECT_DOUBLE_EQ(n.link(0, 1).bandwidth_gbs, 100.0);  // the NVL default
  EXPECT_EQ(cls(n, "GPU0", "GPU2"), PathClass::sys);
  std::string bad = text;
  bad.replace(bad.find("class=\"nvl\""), 11, "class=\"XYZ\"");
  expect_invalid([&] { JobTopology::from_xml(bad, "hand.xml"); }, {"hand.xml", "line 8", "XYZ"});
  bad = text;
  bad.replace(bad.find("numa=\"1\"/>"), 10, "numa=\"x\"/>");
  expect_invalid([&] { JobTopology::from_xml(bad, "hand.xml"); }, {"hand.xml", "line 7", "numa"});
}

TEST(Dump, ManyNodesWithoutOneForThisProcessIsAnError) {
  if (const char* id = std::getenv("STRATA_NODE_ID");
      id && (std::string(id) == "A" || std::string(id) == "B"))
    GTEST_SKIP() << "STRATA_NODE_ID names a node of the test file";
  NodeTopology a = quartz(), b = quartz();
  a.id = "A";
  b.id = "B";
  std::string path = temp_file("two.xml", JobTopology::assemble({a, b}, {}).to_xml());
  expect_invalid([&] { load_node(path); }, {path, "STRATA_NODE_ID", "A, B"});
  fs::remove(path);
}

TEST(Placement, GpuFromLocalRankAndVisibleDevicesNicFromTheGpu) {
  const NodeTopology& n = lassen();
  topo::PlacementEnv env{"n1", "host", 1, std::nullopt, "0-1000"};
  RankPlacement r = topo::place(n, 5, env);
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.gpu, 1);
  EXPECT_EQ(r.nic, "mlx5_1");
  EXPECT_EQ(r.numa, -1);  // unbound: spans both sockets
  env.visible_gpus = "3,2";
  env.local_rank = 0;
  EXPECT_EQ(topo::place(n, 0, env).gpu, 3);
  EXPECT_EQ(topo::place(n, 0, env).nic, "mlx5_3");
  env.visible_gpus = "";
  EXPECT_EQ(topo::place(n, 0, env).gpu, -1);
  env.visible_gpus = "2,MIG-x,1";  // like CUDA: the list ends at the first unknown entry
  env.local_rank = 1;
  EXPECT_EQ(topo::place(n, 0, env).gpu, 2);
  const NodeTopology& p8 = power8();
  env.visible_gpus = "GPU-ea919830";  // a UUID prefix
  EXPECT_EQ(topo::place(p8, 0, env).gpu, 2);
}

TEST(Placement, CpuOnlyRanksGetTheNumaNodeAndANicNearTheirCores) {
  const NodeTopology& n = quartz();
  topo::PlacementEnv env{"n1", "host", 0, std::nullopt, "20-23"};
  RankPlacement r = topo::place(n, 0, env);
  EXPECT_EQ(r.gpu, -1);
  EXPECT_EQ(r.numa, 1);
  EXPECT_EQ(r.cpus, "20-23");
  EXPECT_EQ(r.nic, "hfi1_0");
  // Ethernet only: the NIC on the rank's own socket; equals are spread by local rank.
  NodeTopology eth = n;
  eth.devices.erase(eth.devices.begin() + eth.find("hfi1_0"));
  env.cpus = "2";
  EXPECT_EQ(topo::place(eth, 0, env).nic, "eno1");
  env.local_rank = 1;
  EXPECT_EQ(topo::place(eth, 0, env).nic, "aci0");
}

namespace {

// An all-gather across threads, standing in for the bootstrap's: each round every thread drops
// its blob and reads everyone's.
class FakeAllGather {
 public:
  explicit FakeAllGather(int n) : blobs_(size_t(n)), sync_(n) {}
  AllGatherBytes for_rank(int r) {
    return [this, r](const std::vector<uint8_t>& mine) {
      blobs_[size_t(r)] = mine;
      sync_.arrive_and_wait();
      auto all = blobs_;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (r == 0) rounds_.push_back(all);
      }
      sync_.arrive_and_wait();
      return all;
    };
  }
  std::vector<std::vector<std::vector<uint8_t>>> rounds_;

 private:
  std::vector<std::vector<uint8_t>> blobs_;
  std::barrier<> sync_;
  std::mutex mu_;
};

}  // namespace

// Two emulated nodes (STRATA_NODE_ID A and B), two ranks each: a DGX-2 and a Lassen node.
TEST(Job, GatherBuildsTheTwoNodeView) {
  const NodeTopology* hw[4] = {&dgx2(), &dgx2(), &lassen(), &lassen()};
  const char* ids[4] = {"A", "A", "B", "B"};
  FakeAllGather fake(4);
  std::vector<JobTopology> views(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      topo::PlacementEnv env{ids[r], std::string("host") + ids[r], r % 2, std::nullopt, "0-1000"};
      RankPlacement me = topo::place(*hw[r], r, env);
      views[size_t(r)] = JobTopology::gather(*hw[r], me, fake.for_rank(r));
    });
  }
  for (auto& t : threads) t.join();
  // Round 2 carried one node description per node, from its lowest rank.
  ASSERT_EQ(fake.rounds_.size(), 2u);
  EXPECT_FALSE(fake.rounds_[1][0].empty());
  EXPECT_TRUE(fake.rounds_[1][1].empty());
  EXPECT_FALSE(fake.rounds_[1][2].empty());
  EXPECT_TRUE(fake.rounds_[1][3].empty());
  for (const JobTopology& job : views) {
    ASSERT_EQ(job.nodes.size(), 2u);
    EXPECT_EQ(job.nodes[0].id, "A");
    EXPECT_EQ(job.nodes[1].id, "B");
    EXPECT_EQ(job.ranks_on(0), (std::vector<int>{0, 1}));
    EXPECT_EQ(job.ranks_on(1), (std::vector<int>{2, 3}));
    EXPECT_EQ(job.ranks[3].local_rank, 1);
    EXPECT_EQ(job.ranks[2].gpu, 0);
    EXPECT_EQ(job.ranks[3].nic, "mlx5_1");
    EXPECT_EQ(job.link(0, 1).cls, PathClass::nvb);
    EXPECT_EQ(job.link(2, 3).cls, PathClass::pix);
    EXPECT_EQ(job.link(1, 1).cls, PathClass::loc);
    Link across = job.link(0, 2);
    EXPECT_EQ(across.cls, PathClass::net);
    EXPECT_DOUBLE_EQ(across.bandwidth_gbs, 10 / 8.0);  // the DGX-2 export has no NIC
    EXPECT_EQ(job.nodes[0].of_kind(DeviceKind::gpu).size(), 16u);
    EXPECT_EQ(job.nodes[1].link(0, 1).cls, lassen().link(0, 1).cls);
  }
}

TEST(Job, DumpRoundTripsAndRanksMustMatchTheirNodes) {
  NodeTopology a = quartz(), b = g4dn();
  a.id = "A";
  b.id = "B";
  std::vector<RankPlacement> ranks(3);
  ranks[0] = {0, "A", "qa", 0, "0-3", 0, -1, "hfi1_0"};
  ranks[1] = {1, "B", "gb", 0, "24-25", 1, 4, "rdmap197s0"};
  ranks[2] = {2, "A", "qa", 0, "20-21", 1, -1, "hfi1_0"};
  JobTopology job = JobTopology::assemble({a, b}, ranks);
  EXPECT_EQ(job.ranks[2].local_rank, 1);
  EXPECT_EQ(job.link(0, 2).cls, PathClass::sys);  // CPU ranks on the two sockets
  EXPECT_EQ(job.link(0, 1).cls, PathClass::net);
  EXPECT_DOUBLE_EQ(job.link(0, 1).bandwidth_gbs, 12.5);  // both RDMA, rate unknown: 100 Gb/s
  std::string path = temp_file("job.xml", "");
  job.save(path);
  JobTopology back = JobTopology::load(path);
  ASSERT_EQ(back.ranks.size(), 3u);
  EXPECT_EQ(back.ranks[1].gpu, 4);
  EXPECT_EQ(back.node_of_rank, job.node_of_rank);
  EXPECT_EQ(back.link(0, 1).cls, PathClass::net);
  fs::remove(path);
  ranks[1].node_id = "C";
  expect_invalid([&] { JobTopology::assemble({a, b}, ranks); }, {"rank 1", "unknown node 'C'"});
  ranks[1].node_id = "B";
  ranks[1].gpu = 9;
  expect_invalid([&] { JobTopology::assemble({a, b}, ranks); }, {"rank 1", "GPU 9"});
}

TEST(Sysfs, ReadsRateStateAndLinkLayer) {
  fs::path root = fs::temp_directory_path() / ("strata_sysfs_" + std::to_string(getpid()));
  fs::create_directories(root / "class/infiniband/mlx5_0/ports/1");
  fs::create_directories(root / "class/net/eth0");
  std::ofstream(root / "class/infiniband/mlx5_0/ports/1/rate") << "200 Gb/sec (4X HDR)\n";
  std::ofstream(root / "class/infiniband/mlx5_0/ports/1/state") << "4: ACTIVE\n";
  std::ofstream(root / "class/infiniband/mlx5_0/ports/1/link_layer") << "Ethernet\n";
  std::ofstream(root / "class/net/eth0/speed") << "25000\n";
  std::ofstream(root / "class/net/eth0/operstate") << "down\n";
  topo::NicSysfs ib = topo::read_rdma_sysfs(root.string(), "mlx5_0");
  EXPECT_DOUBLE_EQ(ib.rate_gbps, 200.0);
  EXPECT_EQ(ib.port, PortState::active);
  EXPECT_EQ(ib.link_layer, "Ethernet");
  topo::NicSysfs eth = topo::read_netdev_sysfs(root.string(), "eth0");
  EXPECT_DOUBLE_EQ(eth.rate_gbps, 25.0);
  EXPECT_EQ(eth.port, PortState::down);
  topo::NicSysfs none = topo::read_netdev_sysfs(root.string(), "missing0");
  EXPECT_EQ(none.rate_gbps, 0.0);
  EXPECT_EQ(none.port, PortState::unknown);
  fs::remove_all(root);
}

namespace {

// NVIDIA and AMD display-class PCI devices this machine has, as the kernel lists them.
size_t pci_gpus_in_sysfs() {
  size_t n = 0;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator("/sys/bus/pci/devices", ec)) {
    std::string cls, vendor;
    std::ifstream(d.path() / "class") >> cls;
    std::ifstream(d.path() / "vendor") >> vendor;
    if (cls.starts_with("0x03") && (vendor == "0x10de" || vendor == "0x1002")) ++n;
  }
  return n;
}

}  // namespace

// On the machine running the test: the CPU topology, and as many GPUs as the kernel lists (none
// on the build machines), without an error.
TEST(Live, DetectsThisMachine) {
  if (const char* f = std::getenv("STRATA_TOPO_FILE"); f && *f)
    GTEST_SKIP() << "STRATA_TOPO_FILE is set";
  NodeTopology n = detect_node();
  EXPECT_GE(n.numa.size(), 1u);
  EXPECT_GE(n.cores, 1);
  EXPECT_GE(n.pus, n.cores);
  EXPECT_FALSE(n.id.empty());
  EXPECT_FALSE(n.hostname.empty());
  EXPECT_EQ(n.of_kind(DeviceKind::gpu).size(), pci_gpus_in_sysfs());
  EXPECT_EQ(n.links.size(), n.devices.size() * n.devices.size());
  RankPlacement me = place_rank(n, 0);
  EXPECT_FALSE(me.cpus.empty());
  EXPECT_EQ(me.node_id, n.id);
}
