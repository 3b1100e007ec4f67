// What a hierarchical algorithm sees of a group that spans nodes: where its ranks sit, and two
// sub-groups to run collectives on: my node's ranks ("node") and the ranks with my local index
// on every node ("rail"). The runtime builds the sub-groups on first use and reports a failed
// leg as the whole group's (runtime/levels.hpp); the algorithms (hierarchical.cpp) only start
// legs and wait for them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "algorithms/collective.hpp"
#include "strata/error.hpp"

namespace strata::algo {

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
};

enum class Level : uint8_t { node, rail };

/// A collective started on a sub-group: calling it waits until the deadline of the collective
/// that started it, and throws a failure as that collective's.
using Leg = std::function<void()>;

class TwoLevel {
 public:
  TwoLevel(const NodeLayout& layout, int rank);
  virtual ~TwoLevel() = default;
  /// Starts collective `c` on my node's group or my rail (arguments as Args says, counts of
  /// that sub-group) for the collective running at `deadline`, `where`.
  virtual Leg start(Level level, Collective c, const Args& a, Clock::time_point deadline,
                    const ErrorContext& where) = 0;
  /// Reusable scratch of at least `bytes` (the collectives that permute blocks).
  uint8_t* scratch(size_t bytes);

  const NodeLayout layout;
  const int node;        ///< my node's index
  const int local_rank;  ///< my index among my node's ranks
  const int local_size;  ///< my node's ranks

 private:
  std::vector<uint8_t> scratch_;
};

struct Exec;
// The hierarchical algorithms (hierarchical.cpp; docs/algorithms.md, "Hierarchical"), on
// Exec::two_level.
/// Reduce-scatter within the node, all-reduce of each shard across nodes (one rail per shard),
/// all-gather within the node; pipelined in chunks so the legs overlap. Any node shape: with
/// uneven nodes the first `smallest()` local ranks carry the shards.
void hierarchical_all_reduce(Exec& e, const Args& a);
/// All-gather across nodes on every rail, then within the node; even nodes only.
void hierarchical_all_gather(Exec& e, const Args& a);
/// Reduce-scatter within the node, then across nodes on every rail; even nodes only.
void hierarchical_reduce_scatter(Exec& e, const Args& a);
/// All-to-all aggregated per node, even nodes only: the node first sorts every block by the local
/// index of its destination, then each rail exchanges one message per node pair holding all of a
/// node's blocks for that peer.
void hierarchical_all_to_all(Exec& e, const Args& a);
/// The same for any counts (hierarchical_all_to_allv.cpp): the counts first, within the node
/// and along the rail, so every claim is checked and every rank knows the call's total; by it,
/// the blocks go aggregated as above or pairwise over the whole group.
void hierarchical_all_to_allv(Exec& e, const Args& a);

}  // namespace strata::algo
