// An island joining running DiLoCo islands (np2-4): the last rank starts alone and asks to join
// the others (islands of one rank); it is admitted at a period's end, receives parameters
// bit-identical to the running islands', and from then on every exchange includes it.
#include "model.hpp"
#include "strata/diloco.hpp"
#include "tests/mp/mp.hpp"

namespace {

using strata::DiLoCo;
using strata::ZeroEngine;

TEST(DiLoCo, AJoiningIslandReceivesTheRunningIslandsStateAndExchangesWithThem) {
  auto& w = mp::world();
  const int n = w.size();
  if (n < 2)
    GTEST_SKIP() << "needs 2 or more ranks (one island training, one joining it): runs in "
                    "sharding_np2 to np4";
  const bool joiner = w.rank() == n - 1;
  const int H = 2;
  shtest::Mlp m;
  for (int stage : {1, 3}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    strata::Communicator running = w.split(joiner ? -1 : 0, w.rank());
    strata::Communicator alone = w.split(joiner ? 0 : -1, w.rank());
    strata::Islands is;
    if (!joiner) is = strata::split_islands(running, n - 1);
    strata::Communicator& island = joiner ? alone : is.island;
    ZeroEngine e(island, m.specs(), shtest::engine_options(stage));
    shtest::init_engine(m, e);
    // One DiLoCo per namespace of the job's store: each stage's run gets its own.
    const strata::DiLoCoOptions o{.outer_every = H,
                                  .island = island,
                                  .job_store = std::make_shared<strata::PrefixStore>(
                                      w.store(), "stage" + std::to_string(stage))};
    std::unique_ptr<DiLoCo> d;
    int step = 0;
    if (joiner) {
      d = DiLoCo::join(e, o);
      step = int(d->inner_steps());
    } else {
      d = std::make_unique<DiLoCo>(e, is.across, o);
      // Until the joiner is in: it may ask before the first period ends or after.
      while (d->islands_left().size() < size_t(n)) {
        ASSERT_LT(step, 20 * H) << "the joiner was never admitted";
        shtest::train_step(m, e, step++, w.rank(), n);
        d->after_inner_step();
      }
    }
    std::vector<int64_t> steps(static_cast<size_t>(n)), mine{step};
    w.all_gather(strata::buffer(mine), strata::buffer(steps)).wait();
    for (int r = 0; r < n; ++r) EXPECT_EQ(steps[size_t(r)], step) << "rank " << r;
    EXPECT_EQ(d->island_index(), joiner ? n - 1 : w.rank());
    std::vector<int> all(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) all[size_t(i)] = i;
    EXPECT_EQ(d->islands_left(), all);
    if (!joiner) {
      EXPECT_EQ(d->stats().joined_islands, std::vector<int>{n - 1});
    }
    // Right after an exchange every running island holds the snapshot: the joiner the same bits.
    std::vector<float> p = e.full_params();
    EXPECT_TRUE(mp::identical_on_all_ranks(w, p.data(), p.size() * sizeof(float)));
    for (int outer = 0; outer < 2; ++outer) {
      for (int h = 0; h < H; ++h) {
        shtest::train_step(m, e, step++, w.rank(), n);
        d->after_inner_step();
      }
      p = e.full_params();  // the joiner's delta is in the average, or it would differ
      EXPECT_TRUE(mp::identical_on_all_ranks(w, p.data(), p.size() * sizeof(float)))
          << "after outer step " << outer << " with the joiner";
    }
    w.barrier().wait();
  }
}

}  // namespace
