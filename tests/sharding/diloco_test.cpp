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

// ||got - want|| / ||want||.
double relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  double d = 0, n = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    d += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    n += want[i] * want[i];
  }
  return std::sqrt(d / n);
}

// One outer step of the formula from every island's full parameters (k islands, n each).
void outer_formula(const std::vector<float>& all, int k, float lr, float mu,
                   std::vector<double>& snap, std::vector<double>& mom) {
  const size_t n = snap.size();
  for (size_t j = 0; j < n; ++j) {
    double avg = 0;
    for (int i = 0; i < k; ++i) avg += snap[j] - double(all[size_t(i) * n + j]);
    avg /= k;
    mom[j] = mu * mom[j] + avg;
    snap[j] -= lr * (avg + mu * mom[j]);
  }
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
    ZeroEngine e(is.island, m.specs(), shtest::engine_options(stage));
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
          outer_formula(all, k, lr, mu, snap, mom);
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
    // The islands started apart: island 0's shard went to the others first.
    EXPECT_DOUBLE_EQ(
        d.stats().bytes,
        (k > 1 ? shard_bytes : 0.0) + outer_steps * strata::all_reduce_bus_bytes(shard_bytes, k));
  }
}

// Where each unit's elements are in full_params() (tensor order, unpadded): W then b.
std::vector<std::pair<size_t, size_t>> unit_spans(const shtest::Mlp& m) {
  std::vector<std::pair<size_t, size_t>> spans;
  size_t at = 0;
  for (size_t l = 0; l < m.layers(); ++l) {
    const size_t n = m.dims[l + 1] * (m.dims[l] + 1);
    spans.push_back({at, at + n});
    at += n;
  }
  return spans;
}

// Every island's full parameters, island by island.
std::vector<float> every_island(strata::Islands& is, ZeroEngine& e) {
  std::vector<float> mine = e.full_params(), all(mine.size() * size_t(is.count));
  is.across.all_gather(strata::buffer(mine), strata::buffer(all)).wait();
  return all;
}

TEST(DiLoCo, StreamingFragmentsSyncOncePerPeriodAndLandAfterTheNextStep) {
  auto& w = mp::world();
  const int k = island_count(w.size());
  strata::Islands is = strata::split_islands(w, k);
  const int per = w.size() / k, H = 4, F = 2, periods = 3;
  const float lr = 0.7f, mu = 0.9f;
  shtest::Mlp m;
  const auto spans = unit_spans(m);
  for (int stage : {0, 1, 3}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    ZeroEngine e(is.island, m.specs(), shtest::engine_options(stage));
    shtest::init_engine(m, e);
    DiLoCo d(e, is.across, {.outer_every = H, .lr = lr, .momentum = mu, .fragments = F});
    EXPECT_EQ(d.stats().bytes, 0.0) << "islands that start alike send nothing at the start";
    // Fragment f's elements in full_params().
    std::vector<std::pair<size_t, size_t>> frag;
    for (int f = 0; f < F; ++f) {
      const auto [a, b] = d.fragment_units(f);
      frag.push_back({spans[a].first, spans[b].second});
    }
    EXPECT_THROW(d.fragment_units(F), strata::Error);
    EXPECT_THROW(d.fragment_units(-1), strata::Error);
    ASSERT_EQ(frag[0].first, 0u);
    ASSERT_EQ(frag[0].second, frag[1].first);
    ASSERT_EQ(frag[1].second, spans.back().second);
    std::vector<float> p0 = e.full_params();
    const size_t n = p0.size();
    std::vector<double> snap(p0.begin(), p0.end()), mom(n, 0.0);
    int pending = -1;           // the fragment whose exchange the reference has in flight
    std::vector<float> launch;  // every island's parameters when it started
    // The formula for the exchange in flight, with this island's inner step since added.
    const auto expected = [&](const std::vector<float>& now) {
      std::vector<float> want = now;
      const size_t me = size_t(is.index) * n;
      for (size_t j = frag[size_t(pending)].first; j < frag[size_t(pending)].second; ++j) {
        double avg = 0;
        for (int i = 0; i < k; ++i) avg += snap[j] - double(launch[size_t(i) * n + j]);
        avg /= k;
        mom[j] = mu * mom[j] + avg;
        snap[j] -= lr * (avg + mu * mom[j]);
        want[j] = float(snap[j] + (double(now[j]) - double(launch[me + j])));
      }
      return want;
    };
    const auto check = [&](const std::vector<float>& want, const std::string& when) {
      const std::vector<float> got = e.full_params();
      double d2 = 0, n2 = 0;
      for (size_t j = 0; j < n; ++j)
        d2 += (double(got[j]) - want[j]) * (double(got[j]) - want[j]),
            n2 += double(want[j]) * want[j];
      EXPECT_LT(std::sqrt(d2 / n2), 2e-6) << when;
    };
    for (int t = 1; t <= periods * H; ++t) {
      shtest::train_step(m, e, t - 1, is.index * per + is.island.rank(), w.size());
      const std::vector<float> all = every_island(is, e);
      const std::vector<float> now(all.begin() + long(size_t(is.index) * n),
                                   all.begin() + long(size_t(is.index + 1) * n));
      std::vector<float> want = now;
      if (pending >= 0) want = expected(now);
      const int due = t % H == 0 ? 0 : t % H == H / 2 ? 1 : -1;  // H - f H / F (mod H)
      EXPECT_EQ(d.after_inner_step(), due >= 0) << "step " << t;
      check(want, "after step " + std::to_string(t));
      pending = due;
      if (due >= 0) launch = all;
    }
    const std::vector<float> now = e.full_params();
    const std::vector<float> want = expected(now);
    d.flush();
    check(want, "flushed");
    EXPECT_EQ(d.stats().fragment_syncs, std::vector<int64_t>(F, periods));
    EXPECT_EQ(d.stats().outer_steps, F * periods);
  }
}

TEST(DiLoCo, QuantisedExchangesStayWithinTheirStatedBounds) {
  auto& w = mp::world();
  const int k = island_count(w.size());
  strata::Islands is = strata::split_islands(w, k);
  const int per = w.size() / k, H = 2;
  shtest::Mlp m;
  for (strata::OuterDtype dtype : {strata::OuterDtype::bf16, strata::OuterDtype::int8}) {
    const bool int8 = dtype == strata::OuterDtype::int8;
    SCOPED_TRACE(int8 ? "int8" : "bf16");
    ZeroEngine e(is.island, m.specs(), shtest::engine_options(2));
    shtest::init_engine(m, e);
    // Averaging (lr 1, momentum 0): new = snapshot - the average of the unpacked deltas.
    DiLoCo d(e, is.across, {.outer_every = H, .lr = 1.0f, .momentum = 0.0f, .dtype = dtype});
    const std::vector<float> snap = e.full_params();
    const size_t n = snap.size();
    for (int t = 0; t < H; ++t) {
      shtest::train_step(m, e, t, is.index * per + is.island.rank(), w.size());
      if (t + 1 < H) {
        EXPECT_FALSE(d.after_inner_step());
      }
    }
    const std::vector<float> all = every_island(is, e);
    EXPECT_TRUE(d.after_inner_step());
    const std::vector<float> got = e.full_params();
    // int8: each value off by at most half its block's step, the block's largest magnitude / 254,
    // bounded here by the island's largest; bf16: by 2^-8 of itself. The average's error is the
    // mean of the islands', plus float32's roundings of the average and the subtraction.
    std::vector<double> biggest(size_t(k), 0.0);
    for (int i = 0; i < k; ++i)
      for (size_t j = 0; j < n; ++j)
        biggest[size_t(i)] =
            std::max(biggest[size_t(i)], std::fabs(double(snap[j]) - all[size_t(i) * n + j]));
    size_t moved = 0;
    for (size_t j = 0; j < n; ++j) {
      double avg = 0, bound = 0;
      for (int i = 0; i < k; ++i) {
        const double delta = double(snap[j]) - all[size_t(i) * n + j];
        avg += delta / k;
        bound += (int8 ? biggest[size_t(i)] / 254 : std::fabs(delta) * 0x1p-8) / k;
      }
      const double want = double(snap[j]) - avg;
      bound += 8 * 0x1p-24 * (std::fabs(snap[j]) + std::fabs(avg));
      ASSERT_LE(std::fabs(got[j] - want), bound) << "element " << j;
      moved += std::fabs(got[j] - want) > 8 * 0x1p-24 * std::fabs(want);
    }
    EXPECT_GT(moved, 0u) << "the quantisation rounded nothing: the test would not see it";
    EXPECT_TRUE(mp::identical_on_all_ranks(w, got.data(), got.size() * sizeof(float)));
  }
}

TEST(DiLoCo, ALostIslandIsDroppedAndTheOthersAverageWithoutIt) {
  // The last island leaves after the first outer step (its ranks abort `across`, as a death
  // looks to the others). The others' next exchange fails, they agree it is gone, rebuild
  // `across` without it and redo the exchange: from then on the formula over them alone.
  auto& w = mp::world();
  const int k = island_count(w.size());
  if (k < 2)
    GTEST_SKIP() << "needs 2 or more islands (one to lose, one to go on): runs in "
                    "sharding_np2 to np4";
  const int per = w.size() / k, H = 2;
  const float lr = 0.7f, mu = 0.9f;
  shtest::Mlp m;
  for (int stage : {0, 3}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    strata::Islands is = strata::split_islands(w, k);
    const bool lost = is.index == k - 1;
    strata::Communicator left = w.split(lost ? -1 : 0, w.rank());  // the test's own view
    ZeroEngine e(is.island, m.specs(), shtest::engine_options(stage));
    shtest::init_engine(m, e);
    DiLoCo d(e, is.across,
             {.outer_every = H,
              .lr = lr,
              .momentum = mu,
              .island = is.island,
              .agreement_timeout = std::chrono::seconds(30)});
    const std::vector<float> start = e.full_params();
    std::vector<double> snap(start.begin(), start.end()), mom(start.size(), 0.0);
    int step = 0;
    for (int outer = 0; outer < 3; ++outer) {
      for (int h = 0; h < H; ++h, ++step) {
        shtest::train_step(m, e, step, is.index * per + is.island.rank(), w.size());
        if (h == H - 1) {
          strata::Communicator& g = outer == 0 ? is.across : left;
          std::vector<float> mine = e.full_params(), all(mine.size() * size_t(g.size()));
          if (outer == 0 || !lost) g.all_gather(strata::buffer(mine), strata::buffer(all)).wait();
          outer_formula(all, outer == 0 ? k : k - 1, lr, mu, snap, mom);
        }
        d.after_inner_step();
      }
      if (lost) {
        is.across.abort();
        break;
      }
      const std::vector<float> got = e.full_params();
      EXPECT_LT(relative_error(got, snap), 2e-6) << "outer step " << outer;
      EXPECT_TRUE(mp::identical_on_all_ranks(left, got.data(), got.size() * sizeof(float)));
    }
    if (!lost) {
      EXPECT_EQ(d.stats().lost_islands, std::vector<int>{k - 1});
      std::vector<int> want(size_t(k - 1));
      for (int i = 0; i < k - 1; ++i) want[size_t(i)] = i;
      EXPECT_EQ(d.islands_left(), want);
      EXPECT_EQ(d.stats().outer_steps, 3);
    }
    w.barrier().wait();
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
  ZeroEngine e(is.island, m.specs(), shtest::engine_options(1));
  shtest::init_engine(m, e);
  EXPECT_NE(message([&] { DiLoCo(e, is.across, {.outer_every = 0}); }).find("outer_every 0"),
            std::string::npos);
  EXPECT_NE(message([&] { DiLoCo(e, is.across, {.lr = 0.0f}); }).find("outer lr"),
            std::string::npos);
  EXPECT_NE(message([&] { DiLoCo(e, is.across, {.momentum = 1.0f}); }).find("outer momentum 1"),
            std::string::npos);
  EXPECT_NE(message([&] { DiLoCo(e, is.across, {.fragments = 5}); }).find("5 fragments"),
            std::string::npos);  // the model has 4 units
  EXPECT_NE(message([&] {
              DiLoCo(e, is.across, {.outer_every = 2, .fragments = 3});
            }).find("at most outer_every 2"),
            std::string::npos);
}

}  // namespace
