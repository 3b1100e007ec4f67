// The two levels of a group that spans nodes: "local", the group's ranks on my node, and "rail",
// the ranks with my local index on every node, as groups of their own (Communicator::Impl).
// runtime/levels.hpp builds them for the hierarchical algorithms and names their failures.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "algorithms/two_level.hpp"
#include "strata/communicator.hpp"
#include "strata/error.hpp"

namespace strata::runtime {

struct SubGroups {
  /// My node's ranks, in group order, and one rank per node (those with my local index), in node
  /// order: groups' own state, called without the public API (runtime/calls.hpp).
  std::shared_ptr<Communicator::Impl> local, rail;

  /// Creates `local` ("<name>/local<node>") and `rail` ("<name>/rail<local index>") over
  /// sub-stores of `store`. Collective over the group: every rank calls it at the same point of
  /// its operation sequence.
  SubGroups(const algo::TwoLevel& me, const std::shared_ptr<Store>& store, const std::string& name,
            std::chrono::milliseconds timeout);
};

/// The group rank of the peer an error of a node or rail group of group `group` names
/// (`sub.peer`, a rank of that sub-group, in `sub.group`: "<group>/local<node>" or
/// "<group>/rail<local index>"); -1 when it names none.
int group_rank_of(const algo::NodeLayout& layout, const std::string& group,
                  const ErrorContext& sub);

}  // namespace strata::runtime
