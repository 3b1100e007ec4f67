#include "bootstrap/node_identity.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>

#include "config.hpp"

namespace strata::bootstrap {

namespace {

std::string boot_id() {
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  return boot;
}

}  // namespace

std::string node_identity() {
  if (!config().node_id.empty()) return config().node_id;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + "/" + boot_id();
}

NodeLayoutInfo node_layout(Store& store, int rank, int size, std::chrono::milliseconds timeout) {
  // "<node identity>\n<boot id>": the node as the job sees it, and the kernel it really runs on.
  const std::string me = node_identity() + "\n" + boot_id();
  store.set("node/" + std::to_string(rank), Bytes(me.begin(), me.end()));
  const std::string my_kernel = me.substr(me.find('\n') + 1);
  std::vector<std::string> seen;
  NodeLayoutInfo info;
  for (int r = 0; r < size; ++r) {
    Bytes b = store.get("node/" + std::to_string(r), timeout);
    const std::string text(b.begin(), b.end());
    const size_t cut = text.find('\n');
    const std::string id = text.substr(0, cut);
    auto it = std::find(seen.begin(), seen.end(), id);
    info.node_of_rank.push_back(int(it - seen.begin()));
    if (it == seen.end()) seen.push_back(id);
    info.ranks_on_my_kernel += cut != std::string::npos && text.substr(cut + 1) == my_kernel;
  }
  // A sub-group sees fewer ranks here than really compete for the cores: keep the most any group
  // of this process saw (the world group, created first, sees them all).
  static std::atomic<int> most{0};
  int prev = most.load();
  while (prev < info.ranks_on_my_kernel && !most.compare_exchange_weak(prev, info.ranks_on_my_kernel)) {
  }
  info.ranks_on_my_kernel = std::max(info.ranks_on_my_kernel, most.load());
  return info;
}

int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return CPU_COUNT(&set);
}

}  // namespace strata::bootstrap
