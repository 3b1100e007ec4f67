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

/// Collective over the ranks of `store`: true when all `size` ranks report the same node.
bool all_on_one_node(Store& store, int rank, int size, std::chrono::milliseconds timeout);

}  // namespace strata::bootstrap
