// The cost model behind the choice: alpha-beta-gamma estimates, in seconds, of each schedule on
// a group's links (docs/algorithms.md gives the formulas). The links' latency and bandwidth are
// the topology layer's figures (docs/topology.md), so the same group on another machine chooses
// by its own links, as NCCL's tuning reads its topology graph. The figures are relative: what
// matters is where two schedules cross, not the seconds themselves.
#pragma once

#include <cstddef>

#include "algorithms/registry.hpp"

namespace strata::algo::cost {

/// A path as the model sees it: seconds per message, seconds per byte.
struct Wire {
  double alpha, beta;
};

/// What Strata's network path adds to a link's latency per message: the UCX worker, the op
/// queue and the wait. Measured: an 8-byte exchange between two processes of one node takes
/// about 3.5 us over UCX (strata-perf, STRATA_SHM=0), whose link estimate is 0.5 us.
constexpr double kSoftwareAlpha = 3e-6;
/// Seconds per byte reduced: one thread summing floats that stream from cache (~8 GB/s).
constexpr double kGamma = 1.0 / 8e9;
/// The ring algorithms' pipeline chunk (algorithms.hpp): reducing one chunk overlaps the
/// transfer of the next, so only the last chunk's reduction is exposed.
constexpr double kRingChunkBytes = 256 * 1024;

/// The flat network path between the group's ranks: the NIC link across nodes; on one node
/// UCX's shared memory, which copies every byte twice (into its FIFO and out).
Wire network(const GroupView& g);
/// The network path between two ranks of one node (a hierarchical algorithm's node leg when the
/// node has no segment, or a pairwise exchange with a neighbour).
Wire node_network(const GroupView& g);
/// The shared segment: signals through one node's memory, no software hop; each byte is copied
/// once in and once out, through cache.
Wire segment(const GroupView& g);

// Flat schedules over `n` ranks, B bytes per rank.
double recursive_doubling(Wire w, int n, double B);
double halving_doubling(Wire w, int n, double B);
double ring_all_reduce(Wire w, int n, double B);
double ring_reduce_scatter(Wire w, int n, double B);
double ring_all_gather(Wire w, int n, double B);
double binomial(Wire w, int n, double B, bool reduces);
/// Gather, scatter: the root's n-1 messages of one block each (B: all blocks).
double linear(Wire w, int n, double B);
/// ceil(log2 n) rounds of empty messages.
double dissemination(Wire w, int n, double B);
/// The cheapest flat all-reduce of the three (a hierarchical all-reduce's rail leg).
double best_flat_all_reduce(Wire w, int n, double B);
/// Pairwise all-to-all on `g` (B: one rank's whole input): the exchanges with ranks of the same
/// node take the node's path, the others the network's.
double pairwise(const GroupView& g, double B);

// The shared segment over `n` ranks of one node.
double segment_all_reduce(Wire w, int n, double B);
/// Reduce-scatter, all-gather, all-to-all, broadcast: one copy in, one copy out (reduce-scatter:
/// each rank reduces its block from every slot).
double segment_data_movement(Wire w, int n, double B, bool reduces);

// Hierarchical compositions on a group of N nodes with L ranks on the fullest (B: as the
// collective's selection sees it): the node legs on segments (or UCX when STRATA_SHM=0), the rail
// legs on the network, all rails at once.
double hierarchical_all_reduce(const GroupView& g, double B);
double hierarchical_all_gather(const GroupView& g, double B);
double hierarchical_reduce_scatter(const GroupView& g, double B);
double hierarchical_all_to_all(const GroupView& g, double B);
double hierarchical_all_to_allv(const GroupView& g, double B);

}  // namespace strata::algo::cost
