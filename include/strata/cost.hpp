// What a collective would cost on a group of a given shape, as the library's own choice sees it:
// the algorithm it would take and that algorithm's modelled time (the alpha-beta model of
// docs/algorithms.md, "Selection"). For planning (strata-plan), not a measurement.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "strata/topology.hpp"

namespace strata {

/// A group as the cost model sees it.
struct GroupShape {
  int ranks = 1;
  int nodes = 1;              ///< ranks spread as evenly as they divide
  Link intra;                 ///< between two ranks of one node
  Link inter;                 ///< between nodes
  bool shared_memory = true;  ///< a node's ranks meet in a shared segment (host buffers)
};

struct CostEstimate {
  std::string algorithm;  ///< as STRATA_ALGO spells it ("ring", "hierarchical", ...)
  double seconds = 0;
};

/// The algorithm the library would choose for `collective` ("all_reduce", "reduce_scatter",
/// "all_gather", "all_to_all", "broadcast", ...; STRATA_ALGO honoured) and its modelled seconds.
/// `bytes`: the data one rank holds in all (all_reduce's buffer, all_gather's output,
/// reduce_scatter's and all_to_all's input). Throws strata::Error(invalid_argument) for an
/// unknown collective, a shape without ranks, or a link the group uses (intra when a node holds
/// two ranks, inter across nodes) without a bandwidth above 0 or with a negative latency.
CostEstimate estimate_cost(std::string_view collective, const GroupShape& g, size_t bytes);

}  // namespace strata
