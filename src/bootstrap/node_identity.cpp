#include "bootstrap/node_identity.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
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

std::vector<int> node_layout(Store& store, int rank, int size, std::chrono::milliseconds timeout) {
  const std::string me = node_identity();
  store.set("node/" + std::to_string(rank), Bytes(me.begin(), me.end()));
  std::vector<std::string> seen;
  std::vector<int> node_of_rank;
  for (int r = 0; r < size; ++r) {
    Bytes b = store.get("node/" + std::to_string(r), timeout);
    const std::string id(b.begin(), b.end());
    auto it = std::find(seen.begin(), seen.end(), id);
    node_of_rank.push_back(int(it - seen.begin()));
    if (it == seen.end()) seen.push_back(id);
  }
  return node_of_rank;
}

int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return CPU_COUNT(&set);
}

}  // namespace strata::bootstrap
