// Who holds a rank of a group. Each process claims its rank in the group's store: a counter,
// "claims/<rank>", and who made each claim, "claims/<rank>/<n>" (its ProcessId). A process may
// claim a rank it claimed before on the same store (a group created again there: torch's
// destroy_process_group and init_process_group, a new_group after re-init); a second process
// may not. These records stay for the store's life (runtime/setup_store.hpp erases the rest of
// a group's setup).
#pragma once

#include <chrono>
#include <string>

#include "strata/error.hpp"
#include "strata/store.hpp"

namespace strata::bootstrap {

/// Where a group's claims live in its store.
inline constexpr const char* kClaims = "claims/";
/// Counted once per rank claimed twice ("<group>/claimed_twice/<rank>"): the store's server
/// watches it (claim_conflict.hpp).
inline constexpr const char* kClaimedTwice = "claimed_twice/";

/// Claims `rank` of `size` for this process. When another process has claimed it, counts
/// kClaimedTwice and throws (invalid_argument, context `where`): a RANK set twice, or two jobs
/// on one store address and token.
void claim_rank(Store& store, int rank, int size, const ErrorContext& where,
                std::chrono::milliseconds timeout);

}  // namespace strata::bootstrap
