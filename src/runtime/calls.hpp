// Collectives on a group's state (Communicator::Impl) without the public API's argument checks:
// the public Communicator calls these once its Checker has passed, and the hierarchical
// algorithms' legs (runtime/levels.hpp) on their node and rail groups with arguments they built
// themselves. The registry chooses each call's algorithm.
#pragma once

#include <memory>

#include "algorithms/registry.hpp"
#include "runtime/device_path.hpp"
#include "strata/communicator.hpp"

namespace strata::runtime {

using Group = Communicator::Impl;

/// Queues collective `coll` on `g` (counts as algo::Args says; all_to_allv's counts and
/// displacements are copied, the caller's may go). A call whose algorithm has a fast path may
/// complete inside the call (runtime/immediate.cpp). A call on CUDA memory (`at`) takes the
/// device path (runtime/device_path.hpp).
Work call(Group& g, algo::Collective coll, const algo::Args& a, const Placement& at = {});
/// A group's state: what Communicator::create makes once its arguments are checked. Collective:
/// every rank meets in a barrier before it returns; a rank that fails reports why in `store`.
/// Its collectives are then issued by the calling thread only, unless `any_thread` (a group's
/// node and rail groups, which only its own collectives use).
std::shared_ptr<Group> create_group(const std::shared_ptr<Store>& store, int rank, int size,
                                    const CommOptions& options, bool any_thread = false);
/// Communicator::issue_from_this_thread().
void issue_from_this_thread(Group& g);

}  // namespace strata::runtime
