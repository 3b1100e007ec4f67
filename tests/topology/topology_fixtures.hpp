// Shared by the topology tests: the machines' descriptions in tests/data/topologies (see its
// README.md), each loaded once, and lookups of their devices and links by name.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>

#include "strata/error.hpp"
#include "strata/topology.hpp"
#include "tests/expect_error.hpp"

namespace topo_test {

using namespace strata;
using testing_errors::expect_invalid;
namespace fs = std::filesystem;

inline std::string data(const std::string& rel) {
  return std::string(STRATA_TOPO_DATA) + "/" + rel;
}

// Every fixture is loaded once.
inline const NodeTopology& fixture(const std::string& rel) {
  static std::mutex mu;
  static std::map<std::string, NodeTopology> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(rel);
  if (it == cache.end()) it = cache.emplace(rel, load_node(data(rel))).first;
  return it->second;
}
inline const NodeTopology& dgx2() { return fixture("hwloc/nvidia-dgx2h-16xV100-nvswitch.xml"); }
inline const NodeTopology& power8() { return fixture("hwloc/ibm-power8-4xP100-nvlink.xml"); }
inline const NodeTopology& lassen() { return fixture("hwloc/llnl-lassen-power9-4xV100-4xIB.xml"); }
inline const NodeTopology& g4dn() { return fixture("hwloc/aws-g4dn-metal-8xT4-efa.xml"); }
inline const NodeTopology& quartz() { return fixture("hwloc/llnl-quartz-2s-broadwell-nogpu.xml"); }

inline size_t dev(const NodeTopology& n, const std::string& name) {
  int i = n.find(name);
  EXPECT_GE(i, 0) << "no device " << name;
  return i < 0 ? 0 : size_t(i);
}
inline PathClass cls(const NodeTopology& n, const std::string& a, const std::string& b) {
  return n.link(dev(n, a), dev(n, b)).cls;
}
inline std::string nic_of(const NodeTopology& n, const std::string& device) {
  int nic = n.devices[dev(n, device)].nearest_nic;
  return nic < 0 ? "" : n.devices[size_t(nic)].name;
}
inline size_t count(const NodeTopology& n, DeviceKind k) { return n.of_kind(k).size(); }
inline size_t count_nics(const NodeTopology& n, NicKind k) {
  size_t c = 0;
  for (size_t i : n.of_kind(DeviceKind::nic)) c += n.devices[i].nic_kind == k;
  return c;
}

inline std::string temp_file(const std::string& name, const std::string& text) {
  fs::path p = fs::temp_directory_path() / ("strata_topo_" + std::to_string(getpid()) + "_" + name);
  std::ofstream(p) << text;
  return p.string();
}

}  // namespace topo_test
