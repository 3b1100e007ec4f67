// A rank claimed by two processes (bootstrap/rank_claim.hpp; the second counts
// "<group>/claimed_twice/<rank>"): two jobs on one store address with one job token, or a RANK
// set twice. The second claimant fails at once, but the first may already be in a world with the
// other job's processes; the store's server sees the second claim first, and this carries that
// news to whoever ends that world (Communicator::from_env aborts it, naming the cause).
#pragma once

#include <functional>
#include <mutex>
#include <string>

namespace strata::bootstrap {

class ClaimConflict {
 public:
  /// `server` ("host:port") names the store in the message.
  explicit ClaimConflict(std::string server) : server_(std::move(server)) {}
  /// A counter of the store moved to `value` (TcpStoreServer::on_counter); the first count of a
  /// rank claimed twice records the conflict and calls the handler, once.
  void counted(const std::string& key, int64_t value);
  /// Calls `f(why)` on the first conflict; when there was one already, returns its `why` instead
  /// ("" otherwise).
  std::string on_conflict(std::function<void(const std::string&)> f);

 private:
  const std::string server_;
  std::mutex mu_;
  std::string why_;
  std::function<void(const std::string&)> handler_;
};

}  // namespace strata::bootstrap
