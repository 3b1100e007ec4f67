// Where a rank runs: read from the environment (launcher variables, CUDA_VISIBLE_DEVICES, CPU
// affinity), then matched against the node's devices.
#pragma once

#include <optional>
#include <string>

#include "strata/topology.hpp"

namespace strata::topo {

/// The inputs of a placement, so tests can give their own.
struct PlacementEnv {
  std::string node_id;
  std::string hostname;
  int local_rank = 0;                       ///< LOCAL_RANK or the launcher's equivalent
  std::optional<std::string> visible_gpus;  ///< CUDA_VISIBLE_DEVICES; nullopt when unset
  std::string cpus;                         ///< CPU affinity (OS-index list)
};

/// This process's environment.
PlacementEnv placement_env();

/// The placement of rank `rank` on `node` given `env`.
RankPlacement place(const NodeTopology& node, int rank, const PlacementEnv& env);

}  // namespace strata::topo
