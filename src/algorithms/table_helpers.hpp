// What the collectives' tables (<collective>_table.cpp) share: where an algorithm can run, and
// the hierarchical entries' run, which hands the call to the runtime's node and rail legs.
#pragma once

#include "algorithms/registry.hpp"

namespace strata::algo::tables {

inline bool anywhere(const GroupView&) { return true; }
inline bool on_segment(const GroupView& g) { return g.shm; }
inline bool two_level(const GroupView& g) { return g.two_level(); }
inline bool two_level_even(const GroupView& g) { return g.two_level() && g.even(); }

constexpr std::string_view kNoSegment =
    "on a group without a shared segment (one that spans nodes, or STRATA_SHM=0)";

template <Collective C>
void run_two_level(Exec& e, const Args& a) {
  e.two_level->run_legs(C, a, e.deadline, e.where);
}

}  // namespace strata::algo::tables
