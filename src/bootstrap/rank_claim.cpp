#include "bootstrap/rank_claim.hpp"

#include <unistd.h>

#include <algorithm>

#include "bootstrap/node_identity.hpp"
#include "bootstrap/process_id.hpp"

namespace strata::bootstrap {

void claim_rank(Store& store, int rank, int size, const ErrorContext& where,
                std::chrono::milliseconds timeout) {
  const std::string key = kClaims + std::to_string(rank);
  const std::string me = ProcessId::self().encode();
  const int64_t n = store.add(key, 1);
  store.set(key + "/" + std::to_string(n), Bytes(me.begin(), me.end()));
  // Each earlier claimant wrote who it is right after counting itself: wait that long at most.
  const auto patience = std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(10));
  for (int64_t k = 1; k < n; ++k) {
    const Bytes who = store.get(key + "/" + std::to_string(k), patience);
    if (std::string(who.begin(), who.end()) == me) continue;  // this process, before
    store.add(kClaimedTwice + std::to_string(rank), 1);
    throw Error(ErrorCode::invalid_argument, where,
                "rank " + std::to_string(rank) + " of " + std::to_string(size) +
                    " is claimed by two processes (this one: pid " + std::to_string(getpid()) +
                    " on " + node_identity() +
                    "); is RANK set twice, or do two jobs share this store's address and token?");
  }
}

}  // namespace strata::bootstrap
