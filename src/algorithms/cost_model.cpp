#include "algorithms/cost_model.hpp"

#include <algorithm>
#include <cmath>

namespace strata::algo::cost {
namespace {

double seconds(double us) { return us * 1e-6; }
double per_byte(double gbs) { return gbs > 0 ? 1.0 / (gbs * 1e9) : 1.0; }

// Segment chunks stay in cache between the rank that stages them and those that read them, so
// its copies run well above the host link's DRAM-bound copy rate. Measured on this project's VM
// (benchmarks/RESULTS.md, run 1): all-reduce of 4 MiB on 2 ranks takes 247 us on the segment
// (17 GB/s bus bandwidth) and 844 us over UCX's shared memory (5 GB/s), which the model gives as
// two copies per byte at the host link's 10 GB/s: the segment's copies run ~3.4x faster.
constexpr double kSegmentCopySpeedup = 3.4;
// Chunk of the shared segment's pipeline (STRATA_SHM_CHUNK's default); small all-reduces (up to
// 16 KiB) take one signal, larger ones three per chunk.
constexpr double kSegmentChunkBytes = 256 * 1024;
constexpr double kSegmentSmallBytes = 16 * 1024;

struct PowerOfTwo {
  int p, lg;
  bool folded;
};
PowerOfTwo fold(int n) {
  PowerOfTwo f{1, 0, false};
  while (f.p * 2 <= n) f.p *= 2, ++f.lg;
  f.folded = f.p != n;
  return f;
}

double chunks(double bytes, double chunk) { return std::max(1.0, std::ceil(bytes / chunk)); }

}  // namespace

Wire network(const GroupView& g) {
  if (g.nodes == 1) return node_network(g);
  return {seconds(g.inter.latency_us) + kSoftwareAlpha, per_byte(g.inter.bandwidth_gbs)};
}

Wire node_network(const GroupView& g) {
  return {seconds(g.intra.latency_us) + kSoftwareAlpha, 2 * per_byte(g.intra.bandwidth_gbs)};
}

Wire segment(const GroupView& g) {
  return {seconds(g.intra.latency_us), per_byte(g.intra.bandwidth_gbs) / kSegmentCopySpeedup};
}

double recursive_doubling(Wire w, int n, double B) {
  if (n < 2) return 0;
  const PowerOfTwo f = fold(n);
  const double steps = f.lg + (f.folded ? 2 : 0);
  return steps * (w.alpha + B * w.beta) + (f.lg + f.folded) * B * kGamma;
}

double halving_doubling(Wire w, int n, double B) {
  if (n < 2) return 0;
  const PowerOfTwo f = fold(n);
  const double share = double(f.p - 1) / f.p, extra = f.folded ? 2 : 0;
  return (2 * f.lg + extra) * w.alpha + (2 * share + extra) * B * w.beta +
         (share + f.folded) * B * kGamma;
}

double ring_reduce_scatter(Wire w, int n, double B) {
  if (n < 2) return 0;
  // A step's chunks travel together: one latency, then each further chunk's software cost.
  const double block = B / n;
  const double step = w.alpha + (chunks(block, kRingChunkBytes) - 1) * kSoftwareAlpha +
                      std::max(block * w.beta, block * kGamma) +
                      std::min(block, kRingChunkBytes) * kGamma;
  return (n - 1) * step;
}

double ring_all_gather(Wire w, int n, double B) {
  return n < 2 ? 0 : (n - 1) * (w.alpha + B / n * w.beta);
}

double ring_all_reduce(Wire w, int n, double B) {
  return ring_reduce_scatter(w, n, B) + ring_all_gather(w, n, B);
}

double binomial(Wire w, int n, double B, bool reduces) {
  const double steps = n < 2 ? 0 : std::ceil(std::log2(double(n)));
  return steps * (w.alpha + B * w.beta + (reduces ? B * kGamma : 0));
}

double linear(Wire w, int n, double B) { return n < 2 ? 0 : (n - 1) * (w.alpha + B / n * w.beta); }

double dissemination(Wire w, int n, double) { return binomial(w, n, 0, false); }

double best_flat_all_reduce(Wire w, int n, double B) {
  return std::min(
      {recursive_doubling(w, n, B), halving_doubling(w, n, B), ring_all_reduce(w, n, B)});
}

double pairwise(const GroupView& g, double B) {
  const double block = B / g.n;
  const int neighbours = std::min(g.largest, g.n) - 1;
  const Wire near = node_network(g), far = network(g);
  return neighbours * (near.alpha + block * near.beta) +
         (g.n - 1 - neighbours) * (far.alpha + block * far.beta);
}

double segment_all_reduce(Wire w, int n, double B) {
  if (n < 2) return 0;
  const double signals = B <= kSegmentSmallBytes ? 1 : 3 * chunks(B, kSegmentChunkBytes);
  // Copy in, copy out; the reduction of one chunk overlaps the copies of the next.
  return signals * w.alpha + 2 * B * w.beta + std::min(B, kSegmentChunkBytes) * kGamma;
}

double segment_data_movement(Wire w, int n, double B, bool reduces) {
  return 2 * chunks(B, kSegmentChunkBytes) * w.alpha + 2 * B * w.beta +
         (reduces ? std::min(B / n, kSegmentChunkBytes) * kGamma : 0);
}

namespace {

// A node leg of a hierarchical algorithm: the local sub-group, on its segment when it has one.
Wire node_leg(const GroupView& g) { return g.node_segments ? segment(g) : node_network(g); }
double node_all_reduce(const GroupView& g, double B) {
  return g.node_segments ? segment_all_reduce(segment(g), g.largest, B)
                         : best_flat_all_reduce(node_network(g), g.largest, B);
}
double node_data_movement(const GroupView& g, double B, bool reduces) {
  return g.node_segments ? segment_data_movement(segment(g), g.largest, B, reduces)
                         : ring_all_reduce(node_network(g), g.largest, B) / 2;
}
// Below this a hierarchical all-reduce is a node all-reduce then a rail all-reduce of the
// whole buffer (hierarchical.cpp, kShardedBytes).
constexpr double kShardedBytes = 64 * 1024;

}  // namespace

double hierarchical_all_reduce(const GroupView& g, double B) {
  const Wire rail = network(g);
  if (B < kShardedBytes) {
    return node_all_reduce(g, B) + best_flat_all_reduce(rail, g.nodes, B) +
           (g.even() ? 0 : binomial(node_leg(g), g.largest, B, false));
  }
  return node_data_movement(g, B, true) + best_flat_all_reduce(rail, g.nodes, B / g.smallest) +
         node_data_movement(g, B, false);
}

double hierarchical_all_gather(const GroupView& g, double B) {
  // Rail all-gather of the node's share, node all-gather, one permuting copy.
  return ring_all_gather(network(g), g.nodes, B / g.largest) + node_data_movement(g, B, false) +
         B * node_leg(g).beta;
}

double hierarchical_reduce_scatter(const GroupView& g, double B) {
  // One permuting copy, node reduce-scatter, rail reduce-scatter of the node's share.
  return B * node_leg(g).beta + node_data_movement(g, B, true) +
         ring_reduce_scatter(network(g), g.nodes, B / g.largest);
}

double hierarchical_all_to_all(const GroupView& g, double B) {
  // Node all-to-all, two permuting copies, one message per node pair on each rail.
  const Wire rail = network(g);
  return node_data_movement(g, B, false) + 2 * B * node_leg(g).beta +
         (g.nodes - 1) * (rail.alpha + B / g.nodes * rail.beta);
}

double hierarchical_all_to_allv(const GroupView& g, double B) {
  // The counts in the node, then on each rail, then the blocks as all_to_all's (for 0 bytes,
  // as the choice sees it; the algorithm itself may move large blocks pairwise).
  return node_data_movement(g, 0, false) + (g.nodes - 1) * network(g).alpha +
         hierarchical_all_to_all(g, B);
}

}  // namespace strata::algo::cost
