// The job's store as every rank sees it: one process serves it, every process (that one too) is
// a client. Used by from_env (rank 0 serves) and by the C ABI's unique ids (the id's maker serves).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "strata/store.hpp"

namespace strata::bootstrap {

/// A store over a client of `client`'s address. `server` (may be null) is kept running until
/// this store is destroyed and then, for at most 2 s, until the other clients have disconnected:
/// a server that fails because another rank died must let the others see that rank's absence,
/// not the store's. Errors of an unreachable or vanished server name peer 0, the server's rank,
/// unless `outside`: then a process outside the job serves it (strata-store, which strata-run
/// --keep-going starts, so that the job outlives rank 0) and the errors name no rank.
std::shared_ptr<Store> make_job_store(std::unique_ptr<TcpStoreServer> server,
                                      const TcpStoreOptions& client, bool outside = false);

/// When this process serves `store` (a job store): calls `f(why)` on the store's thread, once, when
/// a rank of the job is claimed by a second process (claim_conflict.hpp), or returns that `why`
/// at once if it happened already. "" and no call otherwise.
std::string on_claim_conflict(Store& store, std::function<void(const std::string&)> f);

/// 32 hex digits from /dev/urandom (throws if it cannot be read): secrets and job tokens.
std::string random_token();

/// The address other nodes can reach this one at: the first up, non-loopback IPv4 interface
/// (127.0.0.1 when there is none).
std::string first_external_ipv4();

}  // namespace strata::bootstrap
