#include "bootstrap/node_identity.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <sstream>

#include "base/config.hpp"
#include "bootstrap/await_rank.hpp"
#include "bootstrap/rank_claim.hpp"

namespace strata::bootstrap {

namespace {

std::string boot_id() {
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  return boot;
}

// This process's affinity mask as "0 1 5 ..." (empty if it cannot be read).
std::string my_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "";
  std::string list;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) list += std::to_string(c) + " ";
  }
  return list;
}

void add_cpus(const std::string& list, std::vector<bool>& cpus) {
  std::istringstream in(list);
  for (int c; in >> c;) {
    if (c >= 0 && c < CPU_SETSIZE) cpus[size_t(c)] = true;
  }
}

}  // namespace

std::string node_identity() {
  if (!config().node_id.empty()) return config().node_id;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + "/" + boot_id();
}

NodeLayoutInfo node_layout(Store& store, int rank, int size, const ErrorContext& where,
                           std::chrono::milliseconds timeout, const std::string& links) {
  // "<node identity>\n<boot id>\n<process>\n<cpus>\n<links>": the node as the job sees it, the
  // kernel it really runs on, the process (bootstrap/process_id.hpp), the CPUs it may run on
  // and what it says of its links. The masks, not this process's alone, say whether ranks share
  // cores: with `mpirun --bind-to core` every rank sees one CPU, yet two ranks on two cores do
  // not take turns.
  const std::string me = node_identity() + "\n" + boot_id() + "\n" + ProcessId::self().encode() +
                         "\n" + my_cpus() + "\n" + links + "\n" + std::to_string(size);
  // Two processes given one rank (a RANK set twice, two jobs): the second to claim it is told,
  // and its report ends the others' waits (Communicator creation reports a failed setup).
  claim_rank(store, rank, size, where, timeout);
  // From here on a death of this process is seen by the ranks that wait for it (get_published).
  store.set_when_gone(gone_key(rank), Bytes{'1'});
  store.set("node/" + std::to_string(rank), Bytes(me.begin(), me.end()));
  const std::string my_kernel = boot_id();
  std::vector<std::string> seen;
  std::vector<bool> cpus(CPU_SETSIZE);
  NodeLayoutInfo info;
  for (int r = 0; r < size; ++r) {
    Bytes b =
        get_published(store, "node/" + std::to_string(r), r, "its node identity", where, timeout);
    std::istringstream text(std::string(b.begin(), b.end()));
    std::string id, kernel, process, cpu_list, rank_links, rank_size;
    std::getline(text, id);
    std::getline(text, kernel);
    std::getline(text, process);
    std::getline(text, cpu_list);
    std::getline(text, rank_links);
    std::getline(text, rank_size);
    if (rank_size != std::to_string(size)) {
      ErrorContext w = where;
      w.peer = r;
      throw Error(ErrorCode::invalid_argument, w,
                  "rank " + std::to_string(r) + " was started with a world of " + rank_size +
                      " ranks, this rank with " + std::to_string(size) +
                      "; is WORLD_SIZE the same everywhere?");
    }
    auto it = std::find(seen.begin(), seen.end(), id);
    info.node_of_rank.push_back(int(it - seen.begin()));
    if (it == seen.end()) seen.push_back(id);
    if (kernel == my_kernel) {
      ++info.ranks_on_my_kernel;
      add_cpus(cpu_list, cpus);
    }
    info.process_of_rank.push_back(ProcessId::decode(process));
    info.links_of_rank.push_back(rank_links);
  }
  // A sub-group sees fewer ranks here than really compete for the cores: keep the most any group
  // of this process saw (the world group, created first, sees them all).
  static std::mutex mu;
  static int most_ranks = 0;
  static std::vector<bool> most_cpus(CPU_SETSIZE);
  std::lock_guard<std::mutex> lock(mu);
  most_ranks = std::max(most_ranks, info.ranks_on_my_kernel);
  for (size_t c = 0; c < cpus.size(); ++c) most_cpus[c] = most_cpus[c] || cpus[c];
  info.ranks_on_my_kernel = most_ranks;
  info.cpus_of_my_kernel = int(std::count(most_cpus.begin(), most_cpus.end(), true));
  if (info.cpus_of_my_kernel == 0) info.cpus_of_my_kernel = int(sysconf(_SC_NPROCESSORS_ONLN));
  return info;
}

}  // namespace strata::bootstrap
