// STRATA_DEBUG=INFO logs each algorithm choice once per group, collective and size class
// (algo::ChoiceLog, algorithms/select.hpp). CTest runs this with STRATA_DEBUG=INFO.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "algorithms/select.hpp"
#include "base/log.hpp"

using namespace strata;
using algo::Algo;
using algo::Collective;

TEST(ChoiceLog, EachGroupLogsEachCollectiveAndSizeClassOnce) {
  ASSERT_TRUE(log::enabled(log::Level::INFO)) << "needs STRATA_DEBUG=INFO (set by CTest)";
  algo::ChoiceLog tp, pp, dp;
  const algo::Choice shm{Algo::shm, false};
  testing::internal::CaptureStderr();
  tp.note("world/tp", 2, Collective::all_reduce, 1000, shm);  // 2^9 <= 1000 < 2^10
  tp.note("world/tp", 2, Collective::all_reduce, 1023, shm);  // the same class: not again
  tp.note("world/tp", 2, Collective::all_reduce, 1024, shm);  // 2^10
  tp.note("world/tp", 2, Collective::all_gather, 1000, shm);  // another collective
  // Another group of the same size making the same choice: logged too, with its name.
  pp.note("world/pp", 2, Collective::all_reduce, 1000, shm);
  dp.note("world/dp", 4, Collective::all_reduce, 1000, {Algo::ring, true});
  dp.note("world/dp", 4, Collective::all_reduce, 600, {Algo::ring, true});
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
