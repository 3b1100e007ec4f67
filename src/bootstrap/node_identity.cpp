#include "bootstrap/node_identity.hpp"

#include <sched.h>
#include <unistd.h>

#include <fstream>

#include "config.hpp"

namespace strata::bootstrap {

std::string node_identity() {
  if (!config().node_id.empty()) return config().node_id;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  return std::string(host) + "/" + boot;
}

int ranks_on_my_node(Store& store, int rank, int size, std::chrono::milliseconds timeout) {
  const std::string me = node_identity();
  store.set("node/" + std::to_string(rank), Bytes(me.begin(), me.end()));
  int same = 0;
  for (int r = 0; r < size; ++r) {
    Bytes b = store.get("node/" + std::to_string(r), timeout);
    same += std::string(b.begin(), b.end()) == me;
  }
  return same;
}

int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return CPU_COUNT(&set);
}

}  // namespace strata::bootstrap
