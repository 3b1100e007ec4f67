#include "bootstrap/node_identity.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>

#include "bootstrap/await_rank.hpp"
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

NodeLayoutInfo node_layout(Store& store, int rank, int size, const ErrorContext& where,
                           std::chrono::milliseconds timeout) {
  // "<node identity>\n<boot id>\n<process>": the node as the job sees it, the kernel it really
  // runs on, and the process (bootstrap/process_id.hpp).
  const std::string me =
      node_identity() + "\n" + boot_id() + "\n" + ProcessId::self().encode();
  store.set("node/" + std::to_string(rank), Bytes(me.begin(), me.end()));
  const std::string my_kernel = boot_id();
  std::vector<std::string> seen;
  NodeLayoutInfo info;
  for (int r = 0; r < size; ++r) {
    Bytes b = get_published(store, "node/" + std::to_string(r), r, "its node identity", where,
                            timeout);
    std::istringstream text(std::string(b.begin(), b.end()));
    std::string id, kernel, process;
    std::getline(text, id);
    std::getline(text, kernel);
    std::getline(text, process);
    auto it = std::find(seen.begin(), seen.end(), id);
    info.node_of_rank.push_back(int(it - seen.begin()));
    if (it == seen.end()) seen.push_back(id);
    info.ranks_on_my_kernel += kernel == my_kernel;
    info.process_of_rank.push_back(ProcessId::decode(process));
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
