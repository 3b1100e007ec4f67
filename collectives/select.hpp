// Algorithm selection: which algorithm runs a collective of a given size on a given group.
// STRATA_ALGO overrides the choice, per collective ("all_reduce=ring,all_gather=shm") or for all
// ("ring"); an algorithm that cannot run a collective on this group is an error naming both.
#pragma once

#include <cstddef>
#include <string_view>

namespace strata::coll {

enum class Collective { all_reduce, reduce_scatter, all_gather, all_to_all, broadcast, reduce };
enum class Algo { ring, shm, pairwise, binomial, recursive_doubling, halving_doubling };

std::string_view collective_name(Collective c);
std::string_view algo_name(Algo a);

/// The algorithm for `c` moving `bytes` per rank on `n` ranks; `shm` tells whether the group
/// shares one node's memory. Logs the choice once per (collective, size class) at INFO.
Algo choose(Collective c, size_t bytes, int n, bool shm);

}  // namespace strata::coll
