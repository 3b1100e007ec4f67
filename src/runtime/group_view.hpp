// What the algorithm choice knows of a group (algo::GroupView): where its ranks are, and the
// links between them as the topology layer estimates them. Every rank reports its own links when
// the group is created (bootstrap::node_layout carries the line); the view takes the slowest
// report of each, so every rank builds the same view and makes the same choices.
#pragma once

#include <string>
#include <vector>

#include "algorithms/registry.hpp"
#include "algorithms/two_level.hpp"

namespace strata::runtime {

/// This process's links, as the line node_layout publishes: between ranks of its node (host
/// memory) and to other nodes (its NIC: the one place_rank gives it, else Ethernet figures).
/// The node is detect_node()'s (STRATA_TOPO_FILE or the live machine), read once per process;
/// `rank` (the first group's) names this process in the topology layer's log.
std::string my_links(int rank);

/// The view of a group laid out as `layout`, every rank's my_links() line in `links` (indexed by
/// rank); `shm`: the group has a segment. Throws Error(internal) on a malformed line.
algo::GroupView group_view(const algo::NodeLayout& layout, const std::vector<std::string>& links,
                           bool shm, const ErrorContext& where);

/// "intra PHB 10 GB/s 0.5 us, inter NET 1.25 GB/s 30 us": the links a view chose by, for logs.
std::string describe_links(const algo::GroupView& v);

}  // namespace strata::runtime
