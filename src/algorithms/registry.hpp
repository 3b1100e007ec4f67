// The algorithm registry: every collective algorithm is declared once, in its collective's table
// (all_reduce_table.cpp, reduce_scatter_table.cpp, all_gather_table.cpp, all_to_all_table.cpp,
// broadcast_reduce_table.cpp), with its name, a one-line description, its estimated cost on a
// group, whether it can run there and how it runs. STRATA_ALGO's parser, the choice, the choice log
// and the runtime's dispatch all read the tables; docs/architecture.md ("Adding an algorithm")
// shows the two files a new algorithm touches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>

#include "shm/collectives.hpp"
#include "strata/topology.hpp"
#include "strata/types.hpp"
#include "transport/p2p.hpp"

namespace strata::algo {

enum class Collective : uint8_t {
  all_reduce,
  reduce_scatter,
  all_gather,
  all_to_all,
  all_to_allv,
  broadcast,
  reduce
};
std::string_view collective_name(Collective c);

/// One call, as every algorithm of its collective reads it. Counts are in elements.
struct Args {
  const void* in = nullptr;
  void* out = nullptr;
  /// all_reduce, broadcast, reduce: the buffer; reduce_scatter: one rank's block (the output);
  /// all_gather: one rank's block (the input); all_to_all: one (source, destination) block.
  size_t count = 0;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;  ///< reductions
  int root = -1;                ///< broadcast, reduce
  /// all_to_all(v): per-rank counts and displacements, in elements.
  const size_t *send_counts = nullptr, *send_displs = nullptr;
  const size_t *recv_counts = nullptr, *recv_displs = nullptr;
  size_t bytes() const { return count * dtype_size(dtype); }
};

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

/// The node and rail legs of a group that spans nodes, built and run by the runtime (its
/// sub-group communicators, runtime/subgroups.hpp); a failed leg is reported as the group's.
class TwoLevel {
 public:
  virtual ~TwoLevel() = default;
  /// Runs collective `c` as node and rail legs; a failure is reported as the group's at `where`.
  virtual void run_legs(Collective c, const Args& a, Clock::time_point deadline,
                        const ErrorContext& where) = 0;
};

/// What an algorithm runs with.
struct Exec {
  transport::P2P& p2p;                  ///< the group's network path, always
  shm::Segment* shm;                    ///< one node: the shared segment; else null
  shm::StagingWriteModes* write_modes;  ///< with `shm`
  TwoLevel* two_level;                  ///< several nodes: the node and rail legs
  Clock::time_point deadline;
  const ErrorContext& where;
  /// `call`: shm::call_word of a data movement's dtype and root (0 for reductions).
  shm::Context shm_context(uint32_t call = 0) const {
    return {*shm, deadline, where, *write_modes, call};
  }
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
  /// The runtime may complete a small call inside the caller, when the peers are in step
  /// (all-reduce on the segment: runtime/immediate.cpp).
  bool immediate = false;
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

// The tables, one per collective.
std::span<const Algorithm> all_reduce_table();
std::span<const Algorithm> reduce_scatter_table();
std::span<const Algorithm> all_gather_table();
std::span<const Algorithm> all_to_all_table();
std::span<const Algorithm> all_to_allv_table();
std::span<const Algorithm> broadcast_table();
std::span<const Algorithm> reduce_table();

}  // namespace strata::algo
