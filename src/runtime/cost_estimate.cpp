// strata::estimate_cost: the choice and the cost model of src/algorithms on a group described by
// its shape instead of measured at creation (include/strata/cost.hpp).
#include <cmath>

#include "algorithms/registry.hpp"
#include "strata/cost.hpp"

namespace strata {

CostEstimate estimate_cost(std::string_view collective, const GroupShape& g, size_t bytes) {
  const ErrorContext where{.op = "estimate_cost"};
  if (g.ranks < 1 || g.nodes < 1 || g.nodes > g.ranks) {
    throw Error(ErrorCode::invalid_argument, where,
                "a group of " + std::to_string(g.ranks) + " ranks on " + std::to_string(g.nodes) +
                    " nodes (needs 1 <= nodes <= ranks)");
  }
  // A Link's defaults (0 GB/s) model nothing: a link the group uses must say its speed, or
  // every cost would come out infinite.
  auto check_link = [&](const Link& l, const char* which) {
    if (!(l.bandwidth_gbs > 0) || !std::isfinite(l.bandwidth_gbs) || !(l.latency_us >= 0) ||
        !std::isfinite(l.latency_us)) {
      throw Error(ErrorCode::invalid_argument, where,
                  std::string("the ") + which + " link of a group of " + std::to_string(g.ranks) +
                      " ranks on " + std::to_string(g.nodes) + " nodes has " +
                      std::to_string(l.bandwidth_gbs) + " GB/s and " +
                      std::to_string(l.latency_us) +
                      " us (needs a finite bandwidth above 0 and a latency of 0 or more)");
    }
  };
  if (g.ranks > g.nodes) check_link(g.intra, "intra-node");
  if (g.nodes > 1) check_link(g.inter, "inter-node");
  for (size_t i = 0; i < algo::kCollectives; ++i) {
    const auto c = algo::Collective(i);
    if (algo::collective_name(c) != collective) continue;
    algo::GroupView v;
    v.n = g.ranks;
    v.nodes = g.nodes;
    v.smallest = g.ranks / g.nodes;
    v.largest = (g.ranks + g.nodes - 1) / g.nodes;
    v.shm = g.nodes == 1 && g.shared_memory;
    v.node_segments = g.shared_memory;
    v.intra = g.intra;
    v.inter = g.inter;
    const algo::Choice choice = algo::choose(c, v, bytes);
    return {std::string(choice.algo->name), choice.algo->cost(v, bytes)};
  }
  throw Error(ErrorCode::invalid_argument, where,
              "unknown collective '" + std::string(collective) + "'");
}

}  // namespace strata
