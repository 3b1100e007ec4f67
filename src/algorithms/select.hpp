// Algorithm selection: which algorithm runs a collective of a given size on a given group.
// STRATA_ALGO overrides the choice, per collective ("all_reduce=ring,all_gather=shm") or for all
// ("ring"); an algorithm that cannot run a collective on this group is an error naming both.
#pragma once

#include <cstddef>
#include <mutex>
#include <set>
#include <string_view>
#include <tuple>

namespace strata::algo {

enum class Collective { all_reduce, reduce_scatter, all_gather, all_to_all, broadcast, reduce };
enum class Algo { ring, shm, pairwise, binomial, recursive_doubling, halving_doubling, hierarchical };

std::string_view collective_name(Collective c);
std::string_view algo_name(Algo a);

/// Where a group's ranks are, as far as choosing an algorithm is concerned.
struct GroupShape {
  int n = 1;              ///< ranks
  bool shm = false;       ///< all on one node, sharing its memory
  bool two_level = false;  ///< several nodes, some with several ranks: all-reduce can go hierarchical
  bool even = false;       ///< ... with the same number of ranks on every node (all-gather, reduce-scatter too)
};

struct Choice {
  Algo algo;
  bool forced;  ///< by STRATA_ALGO
};

/// The algorithm for `c` moving `bytes` per rank on group `g`. A forced `hierarchical` applies
/// where the group has two levels; elsewhere (the one-node and one-rank-per-node groups it runs
/// on) the default holds.
Choice choose(Collective c, size_t bytes, const GroupShape& g);

/// One group's log of its choices: each (collective, size class, algorithm) once, at INFO.
class ChoiceLog {
 public:
  void note(std::string_view group, int n, Collective c, size_t bytes, Choice choice);

 private:
  std::mutex mu_;
  std::set<std::tuple<int, int, int>> seen_;
};

}  // namespace strata::algo
