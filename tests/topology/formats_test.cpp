// The topology layer's pieces and formats: CPU sets, XML, path class names, bus ids, loading
// and the dump a person edits, the sysfs reader, and live detection on the machine running this.
#include <gtest/gtest.h>

#include "topology/cpuset.hpp"
#include "topology/dump.hpp"
#include "topology/graph.hpp"
#include "topology/sysfs.hpp"
#include "topology/xml.hpp"
#include "topology_fixtures.hpp"

using namespace topo_test;

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
