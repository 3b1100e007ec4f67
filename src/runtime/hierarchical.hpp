// Hierarchical collectives for a group that spans nodes (docs/algorithms.md, "Hierarchical"):
// the intra-node legs run on SubGroups::local (shared memory), the inter-node legs on
// SubGroups::rail, every local rank driving its own rail at once, so each node pair exchanges
// 1/L of the data per rail instead of the whole buffer over one flat ring.
#pragma once

#include "runtime/subgroups.hpp"
#include "strata/types.hpp"

namespace strata::runtime {

/// Reduce-scatter within the node, all-reduce of each shard across nodes (one rail per shard),
/// all-gather within the node; pipelined in chunks so the legs overlap. Any node shape: with
/// uneven nodes the first `smallest()` local ranks carry the shards.
void hierarchical_all_reduce(SubGroups& h, const void* in, void* out, size_t count, DataType dt,
                             ReduceOp op, Clock::time_point deadline);
/// All-gather across nodes on every rail, then within the node; even nodes only.
void hierarchical_all_gather(SubGroups& h, const void* in, void* out, size_t count, DataType dt,
                             Clock::time_point deadline);
/// Reduce-scatter within the node, then across nodes on every rail; even nodes only.
/// `count` is the output's (per rank) element count.
void hierarchical_reduce_scatter(SubGroups& h, const void* in, void* out, size_t count, DataType dt,
                                 ReduceOp op, Clock::time_point deadline);

/// All-to-all aggregated per node, even nodes only: the node first sorts every block by the local
/// index of its destination, then each rail exchanges one message per node pair holding all of a
/// node's blocks for that peer. `count` is the elements per (source, destination) block.
void hierarchical_all_to_all(SubGroups& h, const void* in, void* out, size_t count, DataType dt,
                             Clock::time_point deadline);

}  // namespace strata::runtime
