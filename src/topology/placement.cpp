#include "topology/placement.hpp"

#include <unistd.h>

#include <charconv>
#include <cstdlib>

#include "base/log.hpp"
#include "bootstrap/node_identity.hpp"
#include "topology/cpuset.hpp"

namespace strata::topo {
namespace {

std::optional<int> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  int out = 0;
  auto [p, ec] = std::from_chars(v, v + std::char_traits<char>::length(v), out);
  if (ec != std::errc() || *p != '\0' || out < 0) return std::nullopt;
  return out;
}

// GPU numbers named by CUDA_VISIBLE_DEVICES, in its order. Like CUDA, the list ends at the first
// entry that names no device; entries may be indexes or (prefixes of) GPU UUIDs.
std::vector<int> visible_gpus(const NodeTopology& node, const std::string& list) {
  std::vector<int> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string item = list.substr(start, comma - start);
    start = comma + 1;
    int gpu = -1;
    int index = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), index);
    if (!item.empty() && ec == std::errc() && p == item.data() + item.size()) {
      if (node.gpu(index) >= 0) gpu = index;
    } else if (item.starts_with("GPU-")) {
      for (size_t d : node.of_kind(DeviceKind::gpu))
        if (!node.devices[d].uuid.empty() && node.devices[d].uuid.starts_with(item))
          gpu = node.devices[d].index;
    }
    if (gpu < 0) break;  // MIG-..., an unknown index, or an empty list
    out.push_back(gpu);
  }
  return out;
}

}  // namespace

PlacementEnv placement_env() {
  PlacementEnv env;
  env.node_id = bootstrap::node_identity();
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  env.hostname = host;
  for (const char* name :
       {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    if (auto v = env_int(name)) {
      env.local_rank = *v;
      break;
    }
  }
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) env.visible_gpus = v;
  env.cpus = CpuSet::affinity().to_list();
  return env;
}

RankPlacement place(const NodeTopology& node, int rank, const PlacementEnv& env) {
  RankPlacement r;
  r.rank = rank;
  r.node_id = env.node_id;
  r.hostname = env.hostname;
  r.local_rank = env.local_rank;
  // CPUs: the affinity, restricted to the node's CPUs when it is described from a file (whose
  // machine may have other CPUs than this one).
  CpuSet mine, all;
  CpuSet::parse_list(env.cpus, mine);
  for (const NumaNode& n : node.numa) {
    CpuSet s;
    if (CpuSet::parse_list(n.cpus, s)) all |= s;
  }
  if (CpuSet both = mine & all; !both.empty()) mine = both;
  r.cpus = mine.to_list();
  for (const NumaNode& n : node.numa) {
    CpuSet s;
    if (CpuSet::parse_list(n.cpus, s) && !mine.empty() && mine.subset_of(s)) r.numa = n.os_index;
  }
  // GPU: the local rank's entry among the visible GPUs (every GPU when the variable is unset).
  std::vector<int> visible;
  if (env.visible_gpus) {
    visible = visible_gpus(node, *env.visible_gpus);
  } else {
    for (size_t d : node.of_kind(DeviceKind::gpu)) visible.push_back(node.devices[d].index);
  }
  if (!visible.empty()) r.gpu = visible[size_t(env.local_rank) % visible.size()];
  // NIC: the GPU's own choice, else the best one for the CPUs (local ranks spread over equals).
  int nic = -1;
  if (int g = node.gpu(r.gpu); g >= 0) nic = node.devices[size_t(g)].nearest_nic;
  if (nic < 0) nic = node.nearest_nic(r.cpus, env.local_rank);
  if (nic >= 0) r.nic = node.devices[size_t(nic)].name;
  STRATA_LOG(INFO, "TOPO") << "rank " << rank << " on node " << r.node_id << ": cpus " << r.cpus
                           << ", NUMA " << r.numa << ", GPU " << r.gpu << ", NIC "
                           << (r.nic.empty() ? "none" : r.nic);
  return r;
}

}  // namespace strata::topo

namespace strata {

RankPlacement place_rank(const NodeTopology& node, int rank) {
  return topo::place(node, rank, topo::placement_env());
}

}  // namespace strata
