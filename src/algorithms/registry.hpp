// The algorithm registry: every collective algorithm is declared once, in its collective kind's
// table (<kind>_table.cpp; every kind has one, barrier included), with its name, a one-line
// description, its estimated cost on a group, whether it can run there, how it runs and, for a
// small call, how it completes inside the caller. STRATA_ALGO's parser, the choice, the choice
// log and the runtime's one dispatch path (runtime/calls.cpp) all read the tables;
// docs/architecture.md ("Adding an algorithm") shows the two files a new algorithm touches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>

#include "algorithms/collective.hpp"
#include "algorithms/two_level.hpp"
#include "shm/collectives.hpp"
#include "strata/topology.hpp"
#include "strata/types.hpp"
#include "transport/p2p.hpp"

namespace strata::transport {
class FailureChannel;
}

namespace strata::algo {

/// A group as the choice sees it: where its ranks are and what joins them. Built by the runtime
/// at creation from figures every rank agrees on, so every rank makes the same choice.
struct GroupView {
  int n = 1;  ///< ranks
  int nodes = 1;
  int smallest = 1, largest = 1;  ///< ranks on the emptiest and on the fullest node
  bool shm = false;               ///< one node whose ranks share a segment
  bool node_segments = true;      ///< a group's node legs get segments too (STRATA_SHM)
  Link intra;  ///< between two ranks of one node (host memory): the slowest any rank reports
  Link inter;  ///< between nodes (their NICs): the slowest any rank reports
  /// Several nodes, one with two ranks or more: the node and rail legs of hierarchical
  /// algorithms exist.
  bool two_level() const { return nodes > 1 && largest > 1; }
  /// ... with as many ranks on every node.
  bool even() const { return smallest == largest; }
};

/// What an algorithm runs with.
struct Exec {
  transport::P2P& p2p;                  ///< the group's network path, always
  shm::Segment* shm;                    ///< one node: the shared segment; else null
  shm::StagingWriteModes* write_modes;  ///< with `shm`
  TwoLevel* two_level;                  ///< several nodes: the node and rail legs; else null
  Clock::time_point deadline;
  const ErrorContext& where;
  /// Tells the others what this rank found wrong in the call (hierarchical all_to_allv's
  /// counts); null where nobody can be told.
  transport::FailureChannel* failures = nullptr;
  /// The group as the choice saw it, for an algorithm that chooses again once its ranks agree
  /// on the size (hierarchical all_to_allv); null where unknown.
  const GroupView* view = nullptr;
  /// `call`: shm::call_word of a data movement's dtype and root (0 for reductions).
  shm::Context shm_context(uint32_t call = 0) const {
    return {*shm, deadline, where, *write_modes, call};
  }
};

/// An algorithm's fast path for a small call on one node, completed inside the caller when the
/// peers are in step (runtime/immediate.cpp drives it; all-reduce on the segment has one). Each
/// hook says no, leaving the call to the queue, where the call is not small enough.
struct Now {
  /// Publishes this rank's input if it can without waiting (else nothing: queue the call);
  /// returns the call's number for the hooks below.
  std::optional<uint64_t> (*publish)(shm::Segment& s, const Args& a);
  /// Completes the call if every peer published within `polls` polls each; else false.
  bool (*try_finish)(shm::Segment& s, uint64_t number, const Args& a, int polls);
  /// Completes the call, waiting (on the op queue, with every check of a queued call).
  void (*finish)(Exec& e, uint64_t number, const Args& a);
};

struct Algorithm {
  std::string_view name;         ///< as STRATA_ALGO and the choice log spell it
  std::string_view description;  ///< schedule and cost in one line (docs/algorithms.md)
  /// Estimated seconds for `bytes` per rank on group `g` (algorithms/cost_model.hpp).
  double (*cost)(const GroupView& g, size_t bytes);
  bool (*can_run)(const GroupView& g);
  void (*run)(Exec& e, const Args& a);
  /// Why it cannot run where can_run says no, for STRATA_ALGO's error ("on a group that spans
  /// nodes"); empty when the collective alone says it.
  std::string_view cannot_run = {};
  /// Forced by STRATA_ALGO on a group where it cannot run, the default holds instead of an
  /// error (hierarchical: "where the group has two levels").
  bool forced_falls_back = false;
  /// A small call's fast path (see Now); null when it has none.
  const Now* now = nullptr;
};

/// The table of collective `c`, in order of preference on equal cost.
std::span<const Algorithm> algorithms(Collective c);

struct Choice {
  const Algorithm* algo;
  bool forced;  ///< by STRATA_ALGO
};

/// STRATA_ALGO's value, parsed: collective -> the algorithm name forced on it. "ring" forces
/// every collective, "all_reduce=ring,broadcast=binomial" the ones named. Throws
/// Error(invalid_argument) naming an algorithm no table has, or an unknown collective.
using Forced = std::map<Collective, std::string>;
Forced parse_forced(std::string_view spec);

/// The algorithm for `c` moving `bytes` per rank on `g`: the one `forced` names (an error naming
/// both when it cannot run here, unless it falls back), else the cheapest that can run.
Choice choose(Collective c, const GroupView& g, size_t bytes, const Forced& forced);
/// ... with STRATA_ALGO, parsed once.
Choice choose(Collective c, const GroupView& g, size_t bytes);

/// One group's log of its choices: each (collective, size class, algorithm) once, at INFO.
class ChoiceLog {
 public:
  void note(std::string_view group, const GroupView& g, Collective c, size_t bytes, Choice choice);

 private:
  std::mutex mu_;
  std::set<std::tuple<int, int, const Algorithm*>> seen_;
};

// The tables, one per collective kind (<kind>_table.cpp).
std::span<const Algorithm> all_reduce_table();
std::span<const Algorithm> reduce_scatter_table();
std::span<const Algorithm> all_gather_table();
std::span<const Algorithm> all_to_all_table();
std::span<const Algorithm> all_to_allv_table();
std::span<const Algorithm> broadcast_table();
std::span<const Algorithm> reduce_table();
std::span<const Algorithm> gather_table();
std::span<const Algorithm> scatter_table();
std::span<const Algorithm> barrier_table();

}  // namespace strata::algo
