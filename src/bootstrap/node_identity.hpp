// Which node a rank runs on: hostname + kernel boot id (two containers on one host differ in
// hostname; two VMs with a cloned hostname differ in boot id), or STRATA_NODE_ID when set, which
// is how emulated clusters on one machine pretend to be several nodes.
#pragma once

#include <chrono>
#include <string>

#include "strata/store.hpp"

namespace strata::bootstrap {

/// This process's node identity.
std::string node_identity();

/// Collective over the ranks of `store`: how many of the `size` ranks (this one included) report
/// this rank's node.
int ranks_on_my_node(Store& store, int rank, int size, std::chrono::milliseconds timeout);

/// Cores this process may run on (its affinity mask).
int usable_cores();

}  // namespace strata::bootstrap
