#include "topology/sysfs.hpp"

#include <fstream>
#include <string>

namespace strata::topo {
namespace {

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

}  // namespace

NicSysfs read_rdma_sysfs(const std::string& root, const std::string& name) {
  NicSysfs out;
  const std::string port = root + "/class/infiniband/" + name + "/ports/1/";
  // rate: "100 Gb/sec (4X EDR)"; state: "4: ACTIVE"; link_layer: "InfiniBand" or "Ethernet".
  std::string rate = first_line(port + "rate");
  try {
    if (!rate.empty()) out.rate_gbps = std::stod(rate);
  } catch (...) {
  }
  std::string state = first_line(port + "state");
  if (!state.empty())
    out.port = state.find("ACTIVE") != std::string::npos ? PortState::active : PortState::down;
  out.link_layer = first_line(port + "link_layer");
  return out;
}

NicSysfs read_netdev_sysfs(const std::string& root, const std::string& name) {
  NicSysfs out;
  const std::string dir = root + "/class/net/" + name + "/";
  // speed: Mb/s, -1 (or unreadable) when the driver does not know; operstate: "up", "down", ...
  std::string speed = first_line(dir + "speed");
  try {
    if (!speed.empty() && std::stol(speed) > 0) out.rate_gbps = std::stod(speed) / 1000;
  } catch (...) {
  }
  std::string state = first_line(dir + "operstate");
  if (state == "up")
    out.port = PortState::active;
  else if (state == "down" || state == "lowerlayerdown" || state == "notpresent")
    out.port = PortState::down;
  return out;
}

}  // namespace strata::topo
