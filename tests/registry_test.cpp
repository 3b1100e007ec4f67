// The algorithm registry (src/algorithms/registry.hpp): the tables, STRATA_ALGO's parser and its
// errors, the choice by cost on groups whose links differ, and the choice log. CTest runs it with
// STRATA_DEBUG=INFO (for the log).
#include "algorithms/registry.hpp"

#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/log.hpp"
#include "tests/expect_error.hpp"

using namespace strata;
using algo::Collective;
using algo::GroupView;

namespace {

constexpr Collective kAll[] = {Collective::all_reduce,  Collective::reduce_scatter,
                               Collective::all_gather,  Collective::all_to_all,
                               Collective::all_to_allv, Collective::broadcast,
                               Collective::reduce,      Collective::gather,
                               Collective::scatter,     Collective::barrier};
static_assert(std::size(kAll) == algo::kCollectives);

// Links as the topology layer estimates them (src/topology/estimates.cpp): host memory on one
// node; an Ethernet NIC of unknown rate; a 100 Gb/s InfiniBand NIC.
const Link kHost{PathClass::phb, 10, 0.5};
const Link kEthernet{PathClass::net, 10.0 / 8, 30};
const Link kInfiniBand{PathClass::net, 100.0 / 8, 2};

GroupView one_node(int n, bool shm) {
  return {.n = n,
          .nodes = 1,
          .smallest = n,
          .largest = n,
          .shm = shm,
          .intra = kHost,
          .inter = kEthernet};
}
GroupView nodes(int count, int per_node, Link nic) {
  return {.n = count * per_node,
          .nodes = count,
          .smallest = per_node,
          .largest = per_node,
          .intra = kHost,
          .inter = nic};
}

std::string chosen(Collective c, const GroupView& g, size_t bytes, const algo::Forced& f = {}) {
  const algo::Choice ch = algo::choose(c, g, bytes, f);
  return std::string(ch.algo->name) + (ch.forced ? " (forced)" : "");
}

using testing_errors::error_of;

}  // namespace

TEST(Registry, EveryTableDeclaresEachAlgorithmOnceAndCompletely) {
  for (Collective c : kAll) {
    std::set<std::string_view> names;
    ASSERT_FALSE(algo::algorithms(c).empty()) << algo::collective_name(c);
    for (const auto& a : algo::algorithms(c)) {
      EXPECT_TRUE(names.insert(a.name).second)
          << a.name << " twice in " << algo::collective_name(c);
      EXPECT_FALSE(a.description.empty()) << a.name;
      EXPECT_TRUE(a.cost && a.can_run && a.run) << a.name;
    }
    // Something can run on any group.
    EXPECT_NE(algo::choose(c, nodes(3, 1, kEthernet), 1024, {}).algo, nullptr);
  }
}

TEST(Registry, EveryCollectiveKindResolvesThroughItsTable) {
  // The runtime's one dispatch path (runtime/calls.cpp) reads each kind's shape and table; a
  // kind's name is its shape's, in Collective's order.
  const std::vector<std::string> names = {
      "all_reduce", "reduce_scatter", "all_gather", "all_to_all", "all_to_allv",
      "broadcast",  "reduce",         "gather",     "scatter",    "barrier"};
  for (size_t i = 0; i < algo::kCollectives; ++i) {
    const Collective c = kAll[i];
    EXPECT_EQ(algo::collective_name(c), names[i]);
    for (const GroupView& g : {one_node(2, true), one_node(3, false), nodes(2, 2, kEthernet)}) {
      const algo::Choice ch = algo::choose(c, g, 4096, {});
      ASSERT_NE(ch.algo, nullptr) << names[i];
      const auto table = algo::algorithms(c);
      EXPECT_TRUE(ch.algo >= table.data() && ch.algo < table.data() + table.size()) << names[i];
    }
  }
  EXPECT_EQ(chosen(Collective::gather, one_node(4, true), 1 << 20), "linear");
  EXPECT_EQ(chosen(Collective::scatter, nodes(2, 2, kEthernet), 8), "linear");
  EXPECT_EQ(chosen(Collective::barrier, one_node(4, true), 0), "dissemination");
  // Only all-reduce on the segment completes small calls inside the caller.
  for (Collective c : kAll) {
    for (const auto& a : algo::algorithms(c)) {
      EXPECT_EQ(a.now != nullptr, c == Collective::all_reduce && a.name == "shm") << a.name;
    }
  }
}

TEST(Registry, StrataAlgoIsParsedAgainstTheTables) {
  // A bare name forces the kinds whose table has it, the others keep their default.
  const algo::Forced all = algo::parse_forced("ring");
  EXPECT_EQ(all, (algo::Forced{{Collective::all_reduce, "ring"},
                               {Collective::reduce_scatter, "ring"},
                               {Collective::all_gather, "ring"}}));
  const algo::Forced some = algo::parse_forced("all_reduce=halving_doubling,reduce=binomial");
  EXPECT_EQ(some, (algo::Forced{{Collective::all_reduce, "halving_doubling"},
                                {Collective::reduce, "binomial"}}));
  EXPECT_EQ(
      error_of([] { algo::parse_forced("all_reduce=tree"); }),
      "strata: config failed: STRATA_ALGO: unknown algorithm 'tree' (known: shm, hierarchical, "
      "recursive_doubling, ring, halving_doubling, pairwise, binomial, linear, dissemination)");
  EXPECT_EQ(error_of([] { algo::parse_forced("allreduce=ring"); }),
            "strata: config failed: STRATA_ALGO: unknown collective 'allreduce'");
}

TEST(Registry, AForcedAlgorithmRunsOrFailsNamingBoth) {
  const GroupView flat = nodes(4, 1, kEthernet), two = nodes(2, 2, kEthernet);
  const algo::Forced ring = algo::parse_forced("ring");
  EXPECT_EQ(chosen(Collective::all_reduce, flat, 8, ring), "ring (forced)");
  // reduce's choice is the registry's too (it used to ignore STRATA_ALGO).
  EXPECT_EQ(chosen(Collective::reduce, flat, 8, algo::parse_forced("reduce=binomial")),
            "binomial (forced)");
  EXPECT_EQ(chosen(Collective::barrier, flat, 0, ring), "dissemination");
  EXPECT_EQ(error_of([&] {
              chosen(Collective::all_to_all, flat, 8, algo::parse_forced("all_to_all=ring"));
            }),
            "strata: all_to_all failed: STRATA_ALGO forces ring, which cannot run all_to_all");
  EXPECT_EQ(error_of([&] { chosen(Collective::broadcast, flat, 8, algo::parse_forced("shm")); }),
            "strata: broadcast failed: STRATA_ALGO forces shm, which cannot run broadcast on a "
            "group without "
            "a shared segment (one that spans nodes, or STRATA_SHM=0)");
  // hierarchical applies where the group has two levels and leaves the default elsewhere.
  const algo::Forced hier = algo::parse_forced("all_reduce=hierarchical");
  EXPECT_EQ(chosen(Collective::all_reduce, two, 1 << 20, hier), "hierarchical (forced)");
  EXPECT_EQ(chosen(Collective::all_reduce, one_node(4, true), 1 << 20, hier), "shm");
  EXPECT_EQ(
      error_of([&] {
        chosen(Collective::broadcast, two, 8, algo::parse_forced("broadcast=hierarchical"));
      }),
      "strata: broadcast failed: STRATA_ALGO forces hierarchical, which cannot run broadcast");
}

TEST(Registry, OneNodeTakesTheSegmentAtEverySize) {
  for (int n : {2, 3, 4, 8, 64}) {
    for (size_t bytes = 8; bytes <= (size_t(1) << 30); bytes *= 4) {
      for (Collective c :
           {Collective::all_reduce, Collective::reduce_scatter, Collective::all_gather,
            Collective::all_to_all, Collective::all_to_allv, Collective::broadcast}) {
        EXPECT_EQ(chosen(c, one_node(n, true), bytes), "shm")
            << algo::collective_name(c) << " n " << n << " bytes " << bytes;
      }
    }
  }
}

// all_to_allv's ranks hold different sizes, so runtime::call chooses as for 0 bytes (every rank
// the same). On one node and on a flat network that is also the choice at every size; across
// even nodes it is the hierarchical exchange, whose count and block messages per node pair save
// latency, at every size (the model would give the pairwise exchange large messages over a fast
// fabric: STRATA_ALGO=all_to_allv=pairwise; docs/algorithms.md).
TEST(Registry, AllToAllvChoosesAsForZeroBytes) {
  const auto v = Collective::all_to_allv;
  EXPECT_TRUE(algo::shape(v).sizes_differ);
  for (const GroupView& g : {one_node(2, true), one_node(8, true), one_node(4, false)}) {
    const std::string at_zero = chosen(v, g, 0);
    for (size_t bytes = 8; bytes <= (size_t(1) << 30); bytes *= 4) {
      EXPECT_EQ(chosen(v, g, bytes), at_zero) << "n " << g.n << " bytes " << bytes;
    }
  }
  EXPECT_EQ(chosen(v, one_node(4, true), 0), "shm");
  EXPECT_EQ(chosen(v, one_node(4, false), 0), "pairwise");
  for (const GroupView& g : {nodes(2, 4, kEthernet), nodes(4, 2, kInfiniBand)}) {
    EXPECT_EQ(chosen(v, g, 0), "hierarchical") << "n " << g.n << " nodes " << g.nodes;
  }
  EXPECT_EQ(chosen(v, nodes(2, 4, kEthernet), 1 << 20), "hierarchical");
  EXPECT_EQ(chosen(v, nodes(2, 4, kInfiniBand), 256 << 20), "pairwise");  // what 0 bytes overrules
  GroupView uneven = nodes(2, 4, kEthernet);
  uneven.smallest = 2;
  uneven.n = 6;
  EXPECT_EQ(chosen(v, uneven, 0), "pairwise");
}

TEST(Registry, FlatNetworkChoiceFollowsSizeAndRanks) {
  // Few steps while latency dominates, the bandwidth-optimal schedules above.
  const GroupView four = one_node(4, false);
  EXPECT_EQ(chosen(Collective::all_reduce, four, 8), "recursive_doubling");
  EXPECT_EQ(chosen(Collective::all_reduce, four, 64 << 10), "halving_doubling");
  EXPECT_EQ(chosen(Collective::all_reduce, four, 64 << 20), "ring");
  const GroupView two = one_node(2, false);
  EXPECT_EQ(chosen(Collective::all_reduce, two, 8), "recursive_doubling");
  EXPECT_EQ(chosen(Collective::all_reduce, two, 64 << 20), "ring");
  EXPECT_EQ(chosen(Collective::all_to_all, four, 1 << 20), "pairwise");
  EXPECT_EQ(chosen(Collective::broadcast, four, 1 << 20), "binomial");
}

TEST(Registry, TwoLevelGroupsGoHierarchicalOverSlowLinks) {
  const GroupView ethernet = nodes(2, 4, kEthernet);
  for (size_t bytes : {size_t(8), size_t(64) << 10, size_t(64) << 20}) {
    EXPECT_EQ(chosen(Collective::all_reduce, ethernet, bytes), "hierarchical") << bytes;
    EXPECT_EQ(chosen(Collective::all_gather, ethernet, bytes), "hierarchical") << bytes;
    EXPECT_EQ(chosen(Collective::reduce_scatter, ethernet, bytes), "hierarchical") << bytes;
  }
  // Uneven nodes: hierarchical all-reduce only.
  GroupView uneven = ethernet;
  uneven.smallest = 2;
  uneven.n = 6;
  EXPECT_EQ(chosen(Collective::all_reduce, uneven, 1 << 20), "hierarchical");
  EXPECT_EQ(chosen(Collective::all_gather, uneven, 1 << 20), "ring");
}

TEST(Registry, TheSameGroupChoosesByItsLinks) {
  // All-to-all aggregated per node saves messages across nodes at the price of local copies: it
  // pays while a message's latency outweighs the copies, so a slow-latency NIC keeps it to larger
  // messages than a fast one.
  const GroupView ethernet = nodes(2, 4, kEthernet), infiniband = nodes(2, 4, kInfiniBand);
  EXPECT_EQ(chosen(Collective::all_to_all, ethernet, 8), "hierarchical");
  EXPECT_EQ(chosen(Collective::all_to_all, infiniband, 8), "hierarchical");
  const size_t mid = 1 << 20;
  EXPECT_EQ(chosen(Collective::all_to_all, ethernet, mid), "hierarchical");
  EXPECT_EQ(chosen(Collective::all_to_all, infiniband, mid), "pairwise");
  EXPECT_EQ(chosen(Collective::all_to_all, ethernet, 64 << 20), "pairwise");
}

TEST(ChoiceLog, EachGroupLogsEachCollectiveAndSizeClassOnce) {
  ASSERT_TRUE(log::enabled(log::Level::INFO)) << "needs STRATA_DEBUG=INFO (set by CTest)";
  algo::ChoiceLog tp, pp, dp;
  const GroupView g2 = one_node(2, true), g4 = one_node(4, false);
  const algo::Choice shm{&algo::algorithms(Collective::all_reduce)[0], false};
  const algo::Choice ring =
      algo::choose(Collective::all_reduce, g4, 1000, algo::parse_forced("ring"));
  testing::internal::CaptureStderr();
  tp.note("world/tp", g2, Collective::all_reduce, 1000, shm);  // 2^9 <= 1000 < 2^10
  tp.note("world/tp", g2, Collective::all_reduce, 1023, shm);  // the same class: not again
  tp.note("world/tp", g2, Collective::all_reduce, 1024, shm);  // 2^10
  tp.note("world/tp", g2, Collective::all_gather, 1000, shm);  // another collective
  // Another group of the same size making the same choice: logged too, with its name.
  pp.note("world/pp", g2, Collective::all_reduce, 1000, shm);
  dp.note("world/dp", g4, Collective::all_reduce, 1000, ring);
  dp.note("world/dp", g4, Collective::all_reduce, 600, ring);
  std::vector<std::string> lines;
  std::istringstream err(testing::internal::GetCapturedStderr());
  for (std::string l; std::getline(err, l);) lines.push_back(l.substr(l.find(']') + 2));
  const std::vector<std::string> want = {
      "group world/tp (2 ranks): all_reduce ~2^9 B: shm",
      "group world/tp (2 ranks): all_reduce ~2^10 B: shm",
      "group world/tp (2 ranks): all_gather ~2^9 B: shm",
      "group world/pp (2 ranks): all_reduce ~2^9 B: shm",
      "group world/dp (4 ranks): all_reduce ~2^9 B: ring (STRATA_ALGO)",
  };
  EXPECT_EQ(lines, want);
}
