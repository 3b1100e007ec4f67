// The two levels of a group that spans nodes: "local", the group's ranks on my node, and "rail",
// the ranks with my local index on every node. Hierarchical collectives run their intra-node legs
// on `local` (shared memory) and their inter-node legs on `rail` (the network), all rails at once.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "strata/communicator.hpp"
#include "strata/error.hpp"

namespace strata::runtime {

/// How a group's ranks sit on nodes, known at creation from every rank's node identity.
struct NodeLayout {
  std::vector<int> node_of_rank;           ///< node index of every group rank
  std::vector<std::vector<int>> ranks_of;  ///< group ranks of every node, ascending

  explicit NodeLayout(std::vector<int> node_of_rank);
  size_t nodes() const { return ranks_of.size(); }
  size_t smallest() const;
  size_t largest() const;
  /// Several nodes, one of them with two ranks or more: an all-reduce gains from two levels.
  bool spans_nodes_with_neighbours() const { return nodes() > 1 && largest() > 1; }
  /// ... and every node holds the same number of ranks (all-gather, reduce-scatter).
  bool even() const { return smallest() == largest(); }
  /// The group rank of the peer an error of a node or rail group of group `group` names
  /// (`sub.peer`, a rank of that sub-group, in `sub.group`: "<group>/local<node>" or
  /// "<group>/rail<local index>"); -1 when it names none.
  int group_rank_of(const std::string& group, const ErrorContext& sub) const;
};

struct SubGroups {
  NodeLayout layout;
  int node = 0;        ///< my node's index
  int local_rank = 0;  ///< my index among my node's ranks
  /// My node's ranks, in group order, and one rank per node (those with my local index), in node
  /// order: groups' own state, called without the public API (runtime/calls.hpp).
  std::shared_ptr<Communicator::Impl> local, rail;
  std::vector<uint8_t> scratch;  ///< reused by the collectives that permute blocks

  /// Creates `local` and `rail` over sub-stores of `store`. Collective over the group: every
  /// rank calls it at the same point of its operation sequence.
  SubGroups(const NodeLayout& layout, int rank, const std::shared_ptr<Store>& store,
            const std::string& name, std::chrono::milliseconds timeout);
  /// Scratch of at least `bytes`.
  uint8_t* scratch_of(size_t bytes);
};

}  // namespace strata::runtime
