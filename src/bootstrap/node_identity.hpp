// Which node a rank runs on: hostname + kernel boot id (two containers on one host differ in
// hostname; two VMs with a cloned hostname differ in boot id), or STRATA_NODE_ID when set, which
// is how emulated clusters on one machine pretend to be several nodes.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "strata/store.hpp"

namespace strata::bootstrap {

/// This process's node identity.
std::string node_identity();

/// Collective over the ranks of `store`: the node of each of the `size` ranks, as an index
/// (nodes numbered in order of their lowest rank).
std::vector<int> node_layout(Store& store, int rank, int size, std::chrono::milliseconds timeout);

/// Cores this process may run on (its affinity mask).
int usable_cores();

}  // namespace strata::bootstrap
