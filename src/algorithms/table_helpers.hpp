// What the collectives' tables (<kind>_table.cpp) share: where an algorithm can run, and the
// adapters from a table entry's uniform signatures (cost on a GroupView, run on Exec and Args) to
// the cost model's formulas and the algorithms' own, written once here instead of per entry.
#pragma once

#include "algorithms/algorithms.hpp"
#include "algorithms/cost_model.hpp"
#include "algorithms/registry.hpp"

namespace strata::algo::tables {

inline bool anywhere(const GroupView&) { return true; }
inline bool on_segment(const GroupView& g) { return g.shm; }
inline bool two_level(const GroupView& g) { return g.two_level(); }
inline bool two_level_even(const GroupView& g) { return g.two_level() && g.even(); }

constexpr std::string_view kNoSegment =
    "on a group without a shared segment (one that spans nodes, or STRATA_SHM=0)";

// Costs.
/// A flat schedule on the group's network path.
template <double (*F)(cost::Wire, int, double)>
double on_network(const GroupView& g, size_t B) {
  return F(cost::network(g), g.n, double(B));
}
/// ... that reduces (binomial reduce) or not (binomial broadcast).
template <double (*F)(cost::Wire, int, double, bool), bool Reduces>
double on_network(const GroupView& g, size_t B) {
  return F(cost::network(g), g.n, double(B), Reduces);
}
/// A schedule whose cost reads the whole group (hierarchical, pairwise).
template <double (*F)(const GroupView&, double)>
double on_group(const GroupView& g, size_t B) {
  return F(g, double(B));
}
/// The shared segment moving data: each rank reducing its block from every slot, or not.
template <bool Reduces>
double segment_movement(const GroupView& g, size_t B) {
  return cost::segment_data_movement(cost::segment(g), g.n, double(B), Reduces);
}

// Runs.
/// A reduction over the network path: (P2P, in, out, count, dtype, op).
template <void (*F)(P2P&, const void*, void*, size_t, DataType, ReduceOp)>
void p2p_reduction(Exec& e, const Args& a) {
  F(e.p2p, a.in, a.out, a.count, a.dtype, a.op);
}
/// A rooted data movement over the network path: (P2P, in, out, bytes of one block, root).
template <void (*F)(P2P&, const void*, void*, size_t, int)>
void p2p_rooted(Exec& e, const Args& a) {
  F(e.p2p, a.in, a.out, a.bytes(), a.root);
}

}  // namespace strata::algo::tables
