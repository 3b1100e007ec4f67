// Bootstrap reads values that one particular rank publishes (its address, its node). When that
// rank never publishes, the error must name it: "timed out waiting for rank 3's UCX address" tells
// a person which process to look at; "store.get timed out" does not.
//
// A rank whose setup fails because of another rank reports it in the store (report_failure), and
// every rank waiting in get_published fails at once with that report: the survivors all name the
// rank that died, not the rank that gave up first and so stopped publishing. A rank that dies
// itself cannot report; the store reports for it (gone_key), on any node.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "strata/error.hpp"
#include "strata/store.hpp"

namespace strata::bootstrap {

/// store.get(key); a failure is rethrown with `where` (peer = `owner`) and says that rank `owner`
/// was to publish `what` ("its UCX address"). Fails early when another rank reported a failure,
/// or when `owner` is gone (its process ended after it claimed its rank: see gone_key).
Bytes get_published(Store& store, const std::string& key, int owner, const std::string& what,
                    const ErrorContext& where, std::chrono::milliseconds timeout);

/// The key a rank's claim asks the store to set when it is gone (Store::set_when_gone), so that
/// the ranks waiting for what it would publish learn of its death at once.
std::string gone_key(int rank);

/// Runs `call(slice)`, a blocking store call that throws ErrorCode::timeout, in slices of at
/// most 250 ms until it returns (true), `timeout` passes (its last timeout is rethrown), or
/// `stop()`, asked between slices, says to give up (false). The TCP store answers a slice that
/// runs out with TIMEOUT on the same connection (tcp_store_client.cpp): a slice costs a round
/// trip and the questions asked between slices.
bool in_slices(std::chrono::milliseconds timeout,
               const std::function<void(std::chrono::milliseconds)>& call,
               const std::function<bool()>& stop);

/// The failure another rank of the group recorded with report_failure, as an Error at `where`
/// naming its culprit; when the store is gone and its errors name the rank that served it, that
/// rank as the culprit; nullopt when there is no report (or a store that names nobody).
std::optional<Error> reported_failure(Store& store, const ErrorContext& where);

/// Records that this rank's setup failed with `e` (when it names a culprit) for the others'
/// get_published to see. Best effort: a store that is gone is ignored.
void report_failure(Store& store, const Error& e);

}  // namespace strata::bootstrap
