// Names of the public enums, as printed by strata-topo and written in dumps.
#include <algorithm>
#include <cctype>
#include <string>

#include "strata/topology.hpp"
#include "topology/errors.hpp"

namespace strata {

std::string_view path_class_name(PathClass c) {
  static constexpr std::string_view kNames[] = {"LOC", "NVL", "NVB", "PIX",
                                                "PXB", "PHB", "SYS", "NET"};
  return kNames[size_t(c) < std::size(kNames) ? size_t(c) : 6];
}

PathClass path_class_from_name(std::string_view name) {
  std::string upper(name);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char ch) { return char(std::toupper(ch)); });
  for (int c = 0; c <= int(PathClass::net); ++c)
    if (path_class_name(PathClass(c)) == upper) return PathClass(c);
  topo::fail("unknown path class '" + std::string(name) +
             "' (expected LOC, NVL, NVB, PIX, PXB, PHB, SYS or NET)");
}

std::string_view device_kind_name(DeviceKind k) {
  switch (k) {
    case DeviceKind::cpu:
      return "cpu";
    case DeviceKind::gpu:
      return "gpu";
    case DeviceKind::nic:
      return "nic";
    case DeviceKind::nvswitch:
      return "nvswitch";
  }
  return "cpu";
}

std::string_view nic_kind_name(NicKind k) {
  switch (k) {
    case NicKind::infiniband:
      return "infiniband";
    case NicKind::roce:
      return "roce";
    case NicKind::omnipath:
      return "omnipath";
    case NicKind::efa:
      return "efa";
    case NicKind::ethernet:
      return "ethernet";
    case NicKind::unknown:
      return "unknown";
  }
  return "unknown";
}

}  // namespace strata
