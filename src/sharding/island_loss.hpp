// What the islands left after an exchange failed agree on (diloco.cpp): the islands' first ranks
// meet through the store of their `across` group and one of them, the first to arrive, decides.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "strata/communicator.hpp"  // Store, through the runtime the islands agree over

namespace strata::sharding {

/// Integers as a store value and back: the islands' agreements here, admissions in
/// island_join.cpp.
Bytes encode_ints(const std::vector<int64_t>& v);
std::vector<int64_t> decode_ints(const Bytes& b);

/// Called by the first rank of every island that is still running, after its exchange failed
/// somewhere in the island. `members`: the islands of the last agreement (original indices, in
/// `across` order); `seen`: those this island's ranks saw fail; `epoch`: agreements before this
/// one. Returns the islands left, in order: the decider keeps every island that checks in before
/// `timeout` and was not seen failing by any island that did. Throws strata::Error naming the
/// island when this one is not among them, or timeout when no decision comes.
std::vector<int> agree_islands_left(Store& store, const std::vector<int>& members, int mine,
                                    const std::vector<int>& seen, int epoch,
                                    std::chrono::milliseconds timeout, int rank);

}  // namespace strata::sharding
