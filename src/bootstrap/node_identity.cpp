#include "bootstrap/node_identity.hpp"

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

bool all_on_one_node(Store& store, int rank, int size, std::chrono::milliseconds timeout) {
  const std::string me = node_identity();
  store.set("node/" + std::to_string(rank), Bytes(me.begin(), me.end()));
  bool same = true;
  for (int r = 0; r < size; ++r) {
    Bytes b = store.get("node/" + std::to_string(r), timeout);
    same = same && std::string(b.begin(), b.end()) == me;
  }
  return same;
}

}  // namespace strata::bootstrap
