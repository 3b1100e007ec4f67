// ZeroEngine on every world size: stages 0-3 train the test model to the single-process
// reference, memory follows the ZeRO formulas, and stage 3 gathers within its prefetch window
// (what it refuses and its optimizer options: engine_options_test.cpp).
#include <algorithm>
#include <set>

#include "model.hpp"
#include "tests/mp/mp.hpp"

namespace {
using strata::ZeroEngine;
using strata::ZeroOptions;

ZeroOptions options(int stage, float max_norm = 0.0f) {
  ZeroOptions o;
  o.stage = stage;
  o.buckets.cap_bytes = 260;  // several buckets for this small model
  o.buckets.first_cap_bytes = 100;
  o.adamw.lr = 1e-2f;
  o.adamw.weight_decay = 0.1f;
  o.adamw.max_grad_norm = max_norm;
  return o;
}

void train(const shtest::Mlp& m, ZeroEngine& e, int first_step, int steps) {
  auto& w = mp::world();
  for (int s = first_step; s < first_step + steps; ++s)
    shtest::train_step(m, e, s, w.rank(), w.size());
}

TEST(Zero, EveryStageMatchesTheSingleProcessReferenceAfterFiveSteps) {
  auto& w = mp::world();
  shtest::Mlp m;
  for (float clip : {0.0f, 0.05f}) {  // 0.05 is below this model's gradient norm: clipping acts
    const auto want = shtest::concat(shtest::reference(m, options(0, clip).adamw, 5));
    for (int stage = 0; stage <= 3; ++stage) {
      ZeroEngine e(w, m.specs(), options(stage, clip));
      shtest::init_engine(m, e);
      train(m, e, 0, 5);
      EXPECT_EQ(e.steps_done(), 5);
      const auto got = e.full_params();
      EXPECT_EQ(shtest::compare(got, want), "") << "stage " << stage << " clip " << clip;
      EXPECT_TRUE(mp::identical_on_all_ranks(w, got.data(), got.size() * sizeof(float)))
          << "stage " << stage;
    }
  }
}

TEST(Zero, SgdMatchesTheSingleProcessReferenceOnEveryStage) {
  auto& w = mp::world();
  shtest::Mlp m;
  const auto want =
      shtest::concat(shtest::reference(m, options(0).adamw, 5, strata::UpdateRule::sgd));
  EXPECT_NE(shtest::compare(want, shtest::concat(shtest::reference(m, options(0).adamw, 5))), "");
  for (int stage = 0; stage <= 3; ++stage) {
    ZeroOptions o = options(stage);
    o.rule = strata::UpdateRule::sgd;
    ZeroEngine e(w, m.specs(), o);
    shtest::init_engine(m, e);
    train(m, e, 0, 5);
    const auto got = e.full_params();
    EXPECT_EQ(shtest::compare(got, want), "") << "stage " << stage;
    EXPECT_TRUE(mp::identical_on_all_ranks(w, got.data(), got.size() * sizeof(float)));
    // No moments kept: none allocated, and the state reports them zero.
    EXPECT_EQ(e.memory().optimizer_bytes, 0u) << "stage " << stage;
    const strata::EngineState st = e.state();
    EXPECT_EQ(st.m, std::vector<float>(st.params.size(), 0.0f)) << "stage " << stage;
    EXPECT_EQ(st.v, std::vector<float>(st.params.size(), 0.0f)) << "stage " << stage;
  }
}

TEST(Zero, StageThreeFinishesTheGatherItPrefetchedWhenDestroyed) {
  // Reading unit 0 in a forward pass prefetches unit 1; an engine destroyed then (a trainer's
  // last evaluation) must finish that gather on every rank, not leave its peers waiting in it.
  auto& w = mp::world();
  shtest::Mlp m;
  for (int i = 0; i < 20; ++i) {
    ZeroEngine e(w, m.specs(), options(3));
    shtest::init_engine(m, e);
    e.begin_forward();
    e.gather(0);
    e.release(0);
    const auto& ev = e.gather_events();
    ASSERT_TRUE(std::any_of(ev.begin(), ev.end(), [](const strata::GatherEvent& g) {
      return g.kind == strata::GatherEvent::prefetch && g.unit == 1;
    }));
  }
  std::vector<int> alive{1};
  w.all_reduce(strata::buffer(alive), strata::ReduceOp::sum).wait();
  EXPECT_EQ(alive[0], w.size());
}

TEST(Zero, ClippingActsInTheTestAbove) {
  // Guards the test: with max norm 0.05 the reference differs from the unclipped one.
  shtest::Mlp m;
  auto a = shtest::concat(shtest::reference(m, options(0).adamw, 2));
  auto b = shtest::concat(shtest::reference(m, options(0, 0.05f).adamw, 2));
  EXPECT_NE(shtest::compare(a, b), "");
}

TEST(Zero, MemoryPerRankFollowsTheStageFormulas) {
  auto& w = mp::world();
  shtest::Mlp m;
  const size_t n = size_t(w.size());
  for (int stage = 0; stage <= 3; ++stage) {
    ZeroEngine e(w, m.specs(), options(stage));
    shtest::init_engine(m, e);
    train(m, e, 0, 1);
    const size_t N = e.layout().padded_numel();  // N with each unit padded to a multiple of n
    ASSERT_EQ(N % n, 0u);
    const auto r = e.memory();
    // 4N parameters + 4N gradients + 8N Adam moments, divided per stage as ZeRO describes.
    EXPECT_EQ(r.optimizer_bytes, stage >= 1 ? 8 * N / n : 8 * N) << "stage " << stage;
    EXPECT_EQ(r.grad_bytes, stage >= 2 ? 4 * N / n : 4 * N) << "stage " << stage;
    EXPECT_EQ(r.param_bytes, stage >= 3 ? 4 * N / n : 4 * N) << "stage " << stage;
    size_t biggest = 0;
    for (size_t u = 0; u < e.layout().num_units(); ++u)
      biggest = std::max(biggest, 4 * e.layout().unit_numel(u));
    if (stage == 3) {
      EXPECT_GT(r.peak_gathered_bytes, 0u);
      EXPECT_LE(r.peak_gathered_bytes, 2 * biggest);  // depth 1: this unit and the next
    } else {
      EXPECT_EQ(r.peak_gathered_bytes, 0u);
    }
    // Padding adds less than n elements per unit to the unpadded 16N.
    EXPECT_LT(N - e.layout().numel(), n * e.layout().num_units());
  }
}

// Replays the gather events into the set of gathered units.
struct LiveSet {
  std::set<size_t> live;
  size_t seen = 0;
  void update(const std::vector<strata::GatherEvent>& ev) {
    for (; seen < ev.size(); ++seen) {
      if (ev[seen].kind == strata::GatherEvent::free)
        live.erase(ev[seen].unit);
      else
        live.insert(ev[seen].unit);
    }
  }
};

TEST(Zero, Stage3GathersJustInTimeAndNeverBeyondThePrefetchWindow) {
  auto& w = mp::world();
  shtest::Mlp m;
  const size_t L = m.layers();
  for (int depth : {0, 1, 2}) {
    auto o = options(3);
    o.prefetch_depth = depth;
    ZeroEngine e(w, m.specs(), o);
    shtest::init_engine(m, e);
    LiveSet ls;
    auto window = [&](size_t u, bool fwd) {
      std::set<size_t> s;
      for (int k = 0; k <= depth; ++k) {
        long v = fwd ? long(u) + k : long(u) - k;
        if (v >= 0 && v < long(L)) s.insert(size_t(v));
      }
      return s;
    };
    for (int step = 0; step < 2; ++step) {
      // The trainer's loop, checking after each gather which units are gathered or in flight.
      const size_t per = shtest::kGlobalBatch / size_t(w.size());
      auto b = shtest::batch(m, step, size_t(w.rank()) * per, per);
      std::vector<std::vector<float>> acts(L + 1);
      acts[0] = b.x;
      e.begin_forward();
      for (size_t l = 0; l < L; ++l) {
        e.gather(l);
        ls.update(e.gather_events());
        EXPECT_EQ(ls.live, window(l, true)) << "forward unit " << l << " depth " << depth;
        shtest::forward_layer(m, l, e.param(2 * l), e.param(2 * l + 1), acts[l], acts[l + 1], per);
        e.release(l);
        EXPECT_THROW(e.param(2 * l), strata::Error);  // freed after use
      }
      auto dz = shtest::loss_grad(acts[L], b);
      std::vector<float> dz_prev;
      e.begin_backward();
      for (size_t l = L; l-- > 0;) {
        e.gather(l);
        ls.update(e.gather_events());
        EXPECT_EQ(ls.live, window(l, false)) << "backward unit " << l << " depth " << depth;
        shtest::backward_layer(m, l, e.param(2 * l), acts[l], dz, e.grad(2 * l), e.grad(2 * l + 1),
                               dz_prev, per);
        e.ready(2 * l);
        e.ready(2 * l + 1);
        e.release(l);
        dz.swap(dz_prev);
      }
      e.step();
      ls.update(e.gather_events());
      EXPECT_TRUE(ls.live.empty());
    }
    // Peak gathered memory: the largest window of depth + 1 consecutive units.
    size_t bound = 0;
    for (size_t u = 0; u < L; ++u) {
      size_t bytes = 0;
      for (size_t v : window(u, true)) bytes += 4 * e.layout().unit_numel(v);
      bound = std::max(bound, bytes);
    }
    EXPECT_LE(e.memory().peak_gathered_bytes, bound) << "depth " << depth;
    for (auto& ev : e.gather_events()) EXPECT_LE(ev.live_bytes, bound);
    const auto want = shtest::concat(shtest::reference(m, o.adamw, 2));
    EXPECT_EQ(shtest::compare(e.full_params(), want), "") << "depth " << depth;
  }
}

TEST(Zero, Stage3BackwardReusesTheUnitForwardEndedWith) {
  auto& w = mp::world();
  shtest::Mlp m;
  const size_t L = m.layers();
  ZeroEngine e(w, m.specs(), options(3));
  shtest::init_engine(m, e);
  train(m, e, 0, 2);
  std::vector<int> gathers(L, 0);
  for (auto& ev : e.gather_events())
    if (ev.kind != strata::GatherEvent::free) ++gathers[ev.unit];
  for (size_t u = 0; u < L; ++u)
    EXPECT_EQ(gathers[u], u + 1 == L ? 2 : 4) << "unit " << u << " over 2 steps";
  EXPECT_EQ(
      shtest::compare(e.full_params(), shtest::concat(shtest::reference(m, options(3).adamw, 2))),
      "");
}

// A GPT with a tied embedding reads unit 0 again at the head, first in backward, and not at
// backward's end (the embedding's gradient needs no parameters). Here the MLP's first layer
// stands in: its backward is computed without unit 0 (its weights only feed dz_prev, which
// nothing reads). From the second step the window follows those orders: the head's re-read
// prefetches nothing (by unit number it brought unit 1 back and held it through backward),
// unit 0 is kept from the head for the head's backward, and backward's end does not gather it
// (by number, a gather the step's end then dropped).
TEST(Zero, Stage3PrefetchFollowsTheOrderEachPassReads) {
  auto& w = mp::world();
  shtest::Mlp m;
  const size_t L = m.layers(), per = shtest::kGlobalBatch / size_t(w.size());
  auto o = options(3);
  o.prefetch_depth = 1;
  ZeroEngine e(w, m.specs(), o);
  shtest::init_engine(m, e);
  LiveSet ls;
  const int steps = 3;
  std::vector<std::vector<int>> gathers(steps, std::vector<int>(L, 0));
  size_t seen = 0;
  for (int step = 0; step < steps; ++step) {
    auto b = shtest::batch(m, step, size_t(w.rank()) * per, per);
    std::vector<std::vector<float>> acts(L + 1);
    acts[0] = b.x;
    e.begin_forward();
    for (size_t l = 0; l < L; ++l) {
      e.gather(l);
      shtest::forward_layer(m, l, e.param(2 * l), e.param(2 * l + 1), acts[l], acts[l + 1], per);
      e.release(l);
    }
    e.gather(0);  // the head's tied read
    EXPECT_EQ(e.param(0).size(), m.dims[0] * m.dims[1]);
    e.release(0);
    ls.update(e.gather_events());
    if (step > 0) {  // the last unit and unit 0, kept for backward; nothing prefetched
      EXPECT_EQ(ls.live, (std::set<size_t>{0, L - 1})) << "after the head, step " << step;
    }
    std::vector<float> dz = shtest::loss_grad(acts[L], b), dz_prev;
    e.begin_backward();
    e.gather(0);  // the head's backward
    e.release(0);
    const std::vector<float> unused_w0(m.dims[0] * m.dims[1], 0.0f);
    for (size_t l = L; l-- > 0;) {
      if (l > 0) e.gather(l);
      shtest::backward_layer(m, l, l > 0 ? e.param(2 * l) : std::span<const float>(unused_w0),
                             acts[l], dz, e.grad(2 * l), e.grad(2 * l + 1), dz_prev, per);
      e.ready(2 * l + 1);
      e.ready(2 * l);
      if (l > 0) e.release(l);
      dz.swap(dz_prev);
    }
    ls.update(e.gather_events());
    if (step > 0) {
      EXPECT_TRUE(ls.live.empty()) << "after backward, step " << step;
    }
    e.step();
    const auto& ev = e.gather_events();
    for (; seen < ev.size(); ++seen)
      if (ev[seen].kind != strata::GatherEvent::free) ++gathers[size_t(step)][ev[seen].unit];
  }
  // Every step: unit 0 twice (the embedding's read, and the head's, kept for its backward), the
  // last unit once (kept for backward), the others twice. The first step, before any order was
  // recorded, gathered unit 0 twice more: for the head's backward, and at backward's end.
  for (int step = 0; step < steps; ++step) {
    for (size_t u = 0; u < L; ++u) {
      const int want = u == 0 ? (step == 0 ? 4 : 2) : u + 1 == L ? 1 : 2;
      EXPECT_EQ(gathers[size_t(step)][u], want) << "unit " << u << ", step " << step;
    }
  }
  const auto want = shtest::concat(shtest::reference(m, o.adamw, steps));
  EXPECT_EQ(shtest::compare(e.full_params(), want), "");
}

TEST(Zero, Stage3SmallUnitsStayResident) {
  auto& w = mp::world();
  shtest::Mlp m;
  auto o = options(3);
  o.resident_below_bytes = 100;  // the last unit (21 elements, padded to <= 24) stays gathered
  ZeroEngine e(w, m.specs(), o);
  shtest::init_engine(m, e);
  const size_t last = m.layers() - 1;
  train(m, e, 0, 3);
  for (auto& ev : e.gather_events())
    EXPECT_FALSE(ev.kind == strata::GatherEvent::free && ev.unit == last);
  EXPECT_EQ(e.memory().param_bytes, 4 * e.layout().shard_numel() + 4 * e.layout().unit_numel(last));
  EXPECT_EQ(shtest::compare(e.full_params(), shtest::concat(shtest::reference(m, o.adamw, 3))), "");
}

TEST(Zero, EachStepReportsItsCommunicationAndTheExposedPart) {
  auto& w = mp::world();
  shtest::Mlp m;
  for (int stage = 0; stage <= 3; ++stage) {
    ZeroEngine e(w, m.specs(), options(stage));
    shtest::init_engine(m, e);
    train(m, e, 0, 2);
    const auto s = e.last_step_stats();
    // Buckets, plus per-unit parameter gathers in stages 1-3 (stages 1-2: those the first step
    // launched, which the second step's forward waited for).
    EXPECT_GE(s.collectives, e.buckets().size()) << "stage " << stage;
    if (stage == 1 || stage == 2) {
      EXPECT_GE(s.collectives, e.buckets().size() + e.layout().num_units()) << "stage " << stage;
    }
    // Bus bytes: gradients all-reduced (2(n-1)/n) or reduce-scattered ((n-1)/n), parameters
    // all-gathered once in stages 1-2, and in stage 3 every unit for forward plus all but the
    // last again for backward.
    const double n = w.size(), P = 4.0 * e.layout().padded_numel();
    const double last = 4.0 * e.layout().unit_numel(e.layout().num_units() - 1);
    const double want = stage <= 1   ? 2 * (n - 1) / n * P + (stage == 1 ? (n - 1) / n * P : 0)
                        : stage == 2 ? 2 * (n - 1) / n * P
                                     : (n - 1) / n * (3 * P - last);
    EXPECT_NEAR(s.bus_bytes, want, 1e-9 * want) << "stage " << stage;
    EXPECT_GE(s.comm_seconds, 0.0);
    EXPECT_GE(s.exposed_seconds, 0.0);
    if (stage == 3) {
      // Each unit gathered for forward and again for backward, but the last unit only once:
      // backward starts with the unit forward ended with.
      EXPECT_GE(s.collectives, e.buckets().size() + 2 * m.layers() - 1);
    }
  }
}

TEST(Zero, StateMovedIntoAnotherStageContinuesTheSameTraining) {
  // state() and set_state() carry parameters, both moments and the step count: an engine filled
  // from another's state trains on as the original does, bit for bit at the same stage and
  // within rounding at another (whose reductions add in another order).
  auto& w = mp::world();
  shtest::Mlp m;
  for (int from = 0; from <= 3; ++from) {
    ZeroEngine a(w, m.specs(), options(from, 0.05f));
    shtest::init_engine(m, a);
    train(m, a, 0, 3);
    const strata::EngineState st = a.state();
    EXPECT_EQ(st.steps, 3);
    ZeroEngine same(w, m.specs(), options(from, 0.05f));
    ZeroEngine other(w, m.specs(), options((from + 1) % 4, 0.05f));
    shtest::set_state(m, same, st);
    shtest::set_state(m, other, st);
    const strata::EngineState back = other.state();
    EXPECT_EQ(back.params, st.params);
    EXPECT_EQ(back.m, st.m);
    EXPECT_EQ(back.v, st.v);
    train(m, a, 3, 2);
    train(m, same, 3, 2);
    train(m, other, 3, 2);
    EXPECT_EQ(same.full_params(), a.full_params()) << "stage " << from;
    EXPECT_EQ(shtest::compare(other.full_params(), a.full_params()), "") << "stage " << from;
  }
}
}  // namespace
