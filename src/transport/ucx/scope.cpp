#include "transport/ucx/scope.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <ucs/config/global_opts.h>

#include <cstdlib>

#include "transport/ucx/factory.hpp"

namespace strata::ucx {

std::vector<Setting> scope(bool one_node, const std::string& store_address) {
  std::vector<Setting> s;
  // One node: no TCP either. Between local processes it would carry UCX's rendezvous (32 KiB
  // to 16 MiB at 0.8-2.6 GB/s here, where POSIX shared memory alone does 3.7-8 GB/s).
  if (std::getenv("UCX_TLS") == nullptr)
    s.push_back({"TLS", one_node ? "^cma,sysv,tcp" : "^cma,sysv"});
  if (std::getenv("UCX_NET_DEVICES") == nullptr) {
    const std::string device = one_node ? "lo" : interface_of(store_address);
    if (!device.empty()) s.push_back({"NET_DEVICES", device});
  }
  return s;
}

void quiet_after_failure() {
  if (std::getenv("UCX_LOG_LEVEL") == nullptr) ucs_global_opts_set_value("LOG_LEVEL", "fatal");
}

std::string interface_of(const std::string& address) {
  in_addr want{};
  if (inet_pton(AF_INET, address.c_str(), &want) != 1) return {};
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  std::string found;
  for (ifaddrs* a = list; a && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET &&
        reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr == want.s_addr) {
      found = a->ifa_name;
    }
  }
  freeifaddrs(list);
  return found;
}

}  // namespace strata::ucx
