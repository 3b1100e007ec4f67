// The runtime's side of a hierarchical collective (algo::TwoLevel): the node and rail groups,
// built on first use, and a failed leg reported as the whole group's. The algorithms
// (algorithms/hierarchical.cpp) start legs here and wait for them; nothing here knows which
// collective they compose.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "algorithms/two_level.hpp"
#include "runtime/subgroups.hpp"
#include "transport/peer_health.hpp"

namespace strata::runtime {

class Levels final : public algo::TwoLevel {
 public:
  /// The levels of group `name` (this rank `rank`), whose processes `health` watches.
  Levels(const algo::NodeLayout& layout, int rank, std::string name, std::shared_ptr<Store> store,
         std::shared_ptr<transport::PeerHealth> health, std::chrono::milliseconds timeout);
  /// Queues the leg on its sub-group (runtime/calls.hpp). When a leg fails, both sub-groups are
  /// ended (no leg touches the caller's buffers afterwards, no neighbour waits on this rank until
  /// its deadline) and the failure becomes this group's, naming the culprit by its rank here; a
  /// peer's death seen by one rank reaches every rank.
  algo::Leg start(algo::Level level, algo::Collective c, const algo::Args& a,
                  Clock::time_point deadline, const ErrorContext& where) override;
  /// Communicator::abort(): both sub-groups, if they exist.
  void abort();

 private:
  /// Built on first use: called only from a collective's body, which every rank runs at the
  /// same point of its sequence; a failure is reported as that collective's (`where`).
  SubGroups& subgroups(const ErrorContext& where);
  /// A leg's failure `sub`, as this group's at `where`: both levels ended, then thrown.
  [[noreturn]] void fail(const Error& sub, const ErrorContext& where, Clock::time_point deadline);

  const std::string name_;
  const std::shared_ptr<Store> store_;
  const std::shared_ptr<transport::PeerHealth> health_;
  const std::chrono::milliseconds timeout_;
  std::unique_ptr<SubGroups> subgroups_;
};

}  // namespace strata::runtime
