// DiLoCo's outer optimizer on every world size: islands of the test model's engine (2 islands on
// 2 and 4 ranks, 3 on 3, 1 on 1), each trained on its own slice of the batch, then outer steps
// checked element by element against the formula computed here in double from every island's
// parameters; every stage, the start from island 0, the counts and the refusals.
#include "strata/diloco.hpp"

#include <cmath>

#include "model.hpp"
#include "tests/mp/mp.hpp"

namespace {

using strata::DiLoCo;
using strata::ZeroEngine;

int island_count(int world) { return world % 2 == 0 ? 2 : world; }

strata::ZeroOptions options(int stage) {
  strata::ZeroOptions o;
  o.stage = stage;
  o.buckets.cap_bytes = 260;
  o.buckets.first_cap_bytes = 100;
  o.adamw.lr = 1e-2f;
  return o;
}

// ||got - want|| / ||want||.
double relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  double d = 0, n = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    d += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    n += want[i] * want[i];
  }
  return std::sqrt(d / n);
}

TEST(DiLoCo, OuterStepsFollowTheNesterovFormulaOnEveryStage) {
  auto& w = mp::world();
  const int k = island_count(w.size());
  strata::Islands is = strata::split_islands(w, k);
  ASSERT_EQ(is.count, k);
  ASSERT_EQ(is.across.size(), k);
  const int per = w.size() / k;
  const float lr = 0.7f, mu = 0.9f;
  const int H = 2, outer_steps = 3;
  shtest::Mlp m;
  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    ZeroEngine e(is.island, m.specs(), options(stage));
    for (size_t t = 0; t < 2 * m.layers(); ++t) {  // islands start apart: 1, 2, 3 x the init
      std::vector<float> v = m.init(t);
      for (float& x : v) x *= float(1 + is.index);
      e.set_param(t, v);
    }
    DiLoCo d(e, is.across, {.outer_every = H, .lr = lr, .momentum = mu});
    const std::vector<float> start = e.full_params();
    EXPECT_EQ(shtest::compare(start, shtest::concat([&] {
                                std::vector<std::vector<float>> v;
                                for (size_t t = 0; t < 2 * m.layers(); ++t) v.push_back(m.init(t));
                                return v;
                              }()),
                              0.0),
              "")
        << "every island starts from island 0's parameters";
    std::vector<double> snap(start.begin(), start.end()), mom(start.size(), 0.0);
    const size_t n = start.size();
    int step = 0;
    for (int outer = 0; outer < outer_steps; ++outer) {
      for (int h = 0; h < H; ++h, ++step) {
        shtest::train_step(m, e, step, is.index * per + is.island.rank(), w.size());
        if (h == H - 1) {  // the formula, from every island's parameters
          std::vector<float> mine = e.full_params(), all(n * size_t(k));
          is.across.all_gather(strata::buffer(mine), strata::buffer(all)).wait();
          if (k > 1) {  // the islands trained on different samples: the average has work to do
            EXPECT_NE(shtest::compare({all.data(), n}, {all.data() + n, n}), "");
          }
          for (size_t j = 0; j < n; ++j) {
            double avg = 0;
            for (int i = 0; i < k; ++i) avg += snap[j] - double(all[size_t(i) * n + j]);
            avg /= k;
            mom[j] = mu * mom[j] + avg;
            snap[j] -= lr * (avg + mu * mom[j]);
          }
        }
        EXPECT_EQ(d.after_inner_step(), h == H - 1) << "inner step " << step;
      }
      const std::vector<float> got = e.full_params();
      // float32 against double: about 8 roundings of 2^-24 per element and outer step, relative
      // to the parameters' size, accumulating over the steps (5e-7 each); 2e-6 bounds three.
      EXPECT_LT(relative_error(got, snap), 2e-6) << "outer step " << outer;
      EXPECT_TRUE(mp::identical_on_all_ranks(w, got.data(), got.size() * sizeof(float)))
          << "every island holds the same parameters after outer step " << outer;
    }
    EXPECT_EQ(d.stats().outer_steps, outer_steps);
    const double shard_bytes = double(e.layout().shard_numel() * sizeof(float));
    EXPECT_EQ(d.stats().bytes, outer_steps * strata::all_reduce_bus_bytes(shard_bytes, k));
  }
}

TEST(DiLoCo, RefusesBadOptionsAndIslandCountsNamingThem) {
  auto& w = mp::world();
  const auto message = [](auto f) -> std::string {
    try {
      f();
    } catch (const strata::Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message([&] { strata::split_islands(w, 0); }).find("0 islands do not divide"),
            std::string::npos);
  EXPECT_NE(message([&] { strata::split_islands(w, w.size() + 1); }).find("do not divide"),
            std::string::npos);
  strata::Islands is = strata::split_islands(w, island_count(w.size()));
  shtest::Mlp m;
  ZeroEngine e(is.island, m.specs(), options(1));
  shtest::init_engine(m, e);
  EXPECT_NE(message([&] { DiLoCo(e, is.across, {.outer_every = 0}); }).find("outer_every 0"),
            std::string::npos);
  EXPECT_NE(message([&] { DiLoCo(e, is.across, {.lr = 0.0f}); }).find("outer lr"),
            std::string::npos);
  EXPECT_NE(message([&] { DiLoCo(e, is.across, {.momentum = 1.0f}); }).find("outer momentum 1"),
            std::string::npos);
}

}  // namespace
