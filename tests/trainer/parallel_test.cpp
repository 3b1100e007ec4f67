// The reference GPT's parallel layouts under mpirun, against one rank (each rank trains the
// reference itself on a one-rank group): pipeline schedules equal to one rank but for the tied
// embedding's reduction and to each other bit for bit, recompute bit-identical, sequence
// parallelism equal to tensor parallelism, traffic and memory equal to their formulas, every
// pipeline shape training or refused before it starts, bad layouts refused with one line.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <tuple>
#include <vector>

#include "tests/trainer/layout_runs.hpp"
#include "trainer/parallel/planted_fault.hpp"
#include "trainer/validate/layout_formulas.hpp"

namespace {

using namespace layout_runs;
namespace pp = gpt::pp;

// One step of one pipeline (dp = 1) of p stages on the first p ranks, against one rank: only
// wte's gradient is summed differently (head part + embedding part across the first and last
// stage, against one buffer in order on one rank), so every other tensor is bit-identical and wte
// within rounding. (A data-parallel reduction would add its own order: validate checks that.)
struct PipelineStep {
  bool others_bit_identical = false;
  double wte = 0, bound = 0;
};
std::optional<PipelineStep> pipeline_step(const Trained& ref, const TrainOptions& base, int p,
                                          pp::Schedule s, int v) {
  auto& w = mp::world();
  strata::Communicator pipe = w.split(w.rank() < p ? 0 : -1, w.rank());
  if (!pipe) return std::nullopt;
  TrainOptions o = layout(base, 1, p, s, v);
  o.micro_batches = w.size();  // the reference's micro-batches, all in one pipeline
  const Trained got = train(pipe, o, 1);
  const size_t V = wte_numel(base);
  PipelineStep r;
  r.others_bit_identical =
      bits_equal(std::span(got.params).subspan(V), std::span(ref.params).subspan(V));
  // wte's gradient: 2 m partial sums (head and embedding per micro-batch) in another order.
  // Adam's first step divides each gradient by its magnitude, which only shrinks a relative
  // difference, so the reordering's bound holds for the parameters.
  r.wte = rel_l2(std::span(got.params).first(V), std::span(ref.params).first(V));
  r.bound = reorder_bound(2 * o.micro_batches);
  return r;
}

TEST(Pipeline, SchedulesEqualOneRankBitForBitButTheTiedEmbedding) {
  auto& w = mp::world();
  if (w.size() < 2) GTEST_SKIP() << "a pipeline needs 2 or more ranks; gpt_parallel_np2/3/4 run it";
  const TrainOptions base = tiny(8);
  const Trained ref = reference(base, 1);
  for (int p = 2; p <= w.size(); ++p)
    for (auto [s, v] : {std::pair{pp::Schedule::gpipe, 1},
                        {pp::Schedule::one_f_one_b, 1},
                        {pp::Schedule::interleaved, 2}}) {
      if (s == pp::Schedule::interleaved && w.size() % p) continue;
      const auto got = pipeline_step(ref, base, p, s, v);
      if (!got) continue;
      const std::string what = "pp" + std::to_string(p) + " " + std::string(pp::schedule_name(s));
      EXPECT_TRUE(got->others_bit_identical) << what;
      EXPECT_LE(got->wte, got->bound) << what;
      measured(what + ": wte after one step", got->wte, got->bound);
    }
}

TEST(Pipeline, EverySchedulesOfOnePipelineGiveTheSameBits) {
  auto& w = mp::world();
  if (w.size() < 2 || w.size() % 2)
    GTEST_SKIP() << "pp2 needs an even number of ranks; gpt_parallel_np2 and _np4 run it";
  const TrainOptions base = tiny(4);
  const Trained a = train(w, layout(base, 1, 2, pp::Schedule::gpipe), 4);
  const Trained b = train(w, layout(base, 1, 2, pp::Schedule::one_f_one_b), 4);
  const Trained c = train(w, layout(base, 1, 2, pp::Schedule::interleaved, 2), 4);
  EXPECT_TRUE(bits_equal(a.params, b.params));
  EXPECT_TRUE(bits_equal(a.params, c.params));
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.losses, c.losses);
}

// tp2 (with or without sp) over 5 steps against one rank: tp splits the row-parallel products'
// inner dimension (4C in the MLP's projection) into two partial sums, and sp moves the same sums
// to other ranks, so both are the reference with those sums reordered. A loss is a mean over the
// step's tokens (numerics::mean_bound).
struct AgainstOneRank {
  double losses = 0, loss_bound = 0;
  numerics::Worst params;
  double param_bound = 0;
};
AgainstOneRank tp2_against_one_rank(const TrainOptions& base, bool sp) {
  constexpr int kSteps = 5;
  TrainOptions o = layout(base, 2, 1);
  o.sp = sp;
  const Trained got = train(mp::world(), o, kSteps), ref = reference(base, kSteps);
  const double bound = reorder_bound(4 * base.model.embd, kSteps);
  return {rel_l2(got.losses, ref.losses), numerics::mean_bound(bound, tokens(base)),
          numerics::worst_tensor(got.params, ref.params, gpt::param_specs(base.model)), bound};
}

TEST(TensorParallel, RecomputeIsBitIdenticalAndTpAndSpEqualOneRankWithinRounding) {
  auto& w = mp::world();
  if (w.size() < 2 || w.size() % 2)
    GTEST_SKIP() << "tp2 needs an even number of ranks; gpt_parallel_np2 and _np4 run it";
  const TrainOptions base = tiny(2);
  for (bool sp : {false, true}) {
    TrainOptions o = layout(base, 2, 1);
    o.sp = sp;
    const Trained plain = train(w, o, 3);
    o.recompute = true;
    const Trained again = train(w, o, 3);
    EXPECT_TRUE(bits_equal(plain.params, again.params)) << "sp " << sp;
    EXPECT_EQ(plain.losses, again.losses) << "sp " << sp;
    const AgainstOneRank d = tp2_against_one_rank(base, sp);
    const std::string what = sp ? "tp2.sp" : "tp2";
    measured(what + " against one rank, losses", d.losses, d.loss_bound);
    measured(what + " against one rank, worst tensor (" + d.params.tensor + ")", d.params.rel,
             d.param_bound);
    EXPECT_LE(d.losses, d.loss_bound) << what;
    EXPECT_LE(d.params.rel, d.param_bound) << what << ": " << d.params.tensor;
  }
}

// The bounds have teeth: each mistake planted in the trainer fails the check meant to catch it.
TEST(Planted, ASkippedTiedReductionAndAContiguousQkvSliceFailTheChecks) {
  auto& w = mp::world();
  if (w.size() < 2 || w.size() % 2)
    GTEST_SKIP() << "pp2 and tp2 need an even number of ranks; gpt_parallel_np2 and _np4 run it";
  const TrainOptions base = tiny(8);
  const Trained ref = reference(base, 1);
  gpt::plant_fault(gpt::Fault::skip_tied_reduction);
  const auto pipe = pipeline_step(ref, base, 2, pp::Schedule::one_f_one_b, 1);
  gpt::plant_fault(gpt::Fault::contiguous_qkv);
  const AgainstOneRank tp = tp2_against_one_rank(tiny(2), false);
  gpt::plant_fault(gpt::Fault::none);
  if (pipe) {
    measured("planted: pp2 without the tied reduction, wte", pipe->wte, pipe->bound);
    EXPECT_GT(pipe->wte, pipe->bound);
  }
  measured("planted: tp2 with a contiguous q|k|v slice, losses", tp.losses, tp.loss_bound);
  measured("planted: tp2 with a contiguous q|k|v slice, worst tensor (" + tp.params.tensor + ")",
           tp.params.rel, tp.param_bound);
  EXPECT_GT(tp.losses, tp.loss_bound);
  EXPECT_GT(tp.params.rel, tp.param_bound);
}

TEST(Layout, ReplicasStayIdenticalAndTrafficAndMemoryEqualTheFormulas) {
  auto& w = mp::world();
  const int n = w.size();
  std::vector<TrainOptions> layouts;
  const TrainOptions base = tiny(4);
  for (int tp : {1, 2})
    for (int pp : {1, 2})
      for (bool sp : {false, true})
        for (int stage : {0, 1, 2, 3}) {
          if (n % (tp * pp) || (sp && tp == 1)) continue;
          TrainOptions o = layout(base, tp, pp);
          o.sp = sp, o.stage = stage, o.recompute = stage == 3;
          layouts.push_back(o);
        }
  // ZeRO-3 gathers what each pass reads unless the pass before kept it: the count follows the
  // schedule's order of passes.
  for (auto [pp, s, v, m] : {std::tuple{1, pp::Schedule::one_f_one_b, 1, 2},
                             {2, pp::Schedule::gpipe, 1, 4},
                             {2, pp::Schedule::interleaved, 2, 4}}) {
    if (n % pp) continue;
    TrainOptions o = layout(base, 1, pp, s, v);
    o.micro_batches = m, o.stage = 3;
    layouts.push_back(o);
  }
  // SGD keeps no optimizer state: the formula counts none.
  for (int stage : {0, 1}) {
    TrainOptions o = base;
    o.stage = stage, o.rule = strata::UpdateRule::sgd;
    layouts.push_back(o);
  }
  for (const TrainOptions& o : layouts) {
    gpt::Trainer t(w, corpus(), o);
    gpt::StepReport r;
    for (int s = 0; s < 2; ++s) r = t.step();
    const int stage = w.rank() / (n / o.pp);
    const gpt::Traffic f = gpt::traffic_formula(o, n, stage);
    const gpt::Memory m = gpt::memory_formula(o, n, stage);
    const std::string what = gpt::layout_name(o, n);
    EXPECT_DOUBLE_EQ(r.tp_bus_bytes, f.tp_bus_bytes) << what;
    EXPECT_DOUBLE_EQ(r.pp_bytes, f.pp_bytes) << what;
    EXPECT_NEAR(r.bus_bytes, f.dp_bus_bytes, 1e-9 * f.dp_bus_bytes) << what;
    const strata::MemoryReport got = t.engine().memory();
    EXPECT_EQ(got.param_bytes, m.param_bytes) << what;
    EXPECT_EQ(got.grad_bytes, m.grad_bytes) << what;
    EXPECT_EQ(got.optimizer_bytes, m.optimizer_bytes) << what;
    EXPECT_TRUE(t.replicas_identical()) << what;
  }
}

TEST(Layout, ClippingSeesTheWholeModelsGradientNormCountingEveryParameterOnce) {
  // The norm clipping uses, step by step, against one rank's: a norm that counted a replicated
  // LayerNorm on both tp ranks, or the tied embedding on both ends of the pipeline, is larger.
  // (AdamW all but cancels a change of scale, so the losses alone would not show it.)
  auto& w = mp::world();
  if (w.size() % 4)
    GTEST_SKIP() << "tp2 x pp2 needs a multiple of 4 ranks; gpt_parallel_np4 runs it";
  const TrainOptions base = tiny(4);
  TrainOptions one = base;
  one.micro_batches *= w.size();
  const std::vector<float> want = grad_norms(w.split(w.rank(), 0), one, 3);
  ASSERT_GT(want[0], 0.0f);
  for (bool sp : {false, true}) {
    TrainOptions o = layout(base, 2, 2);
    o.sp = sp;
    // The squared norms of 4 slices (tp x pp) summed in another order than one rank's, and
    // the row-parallel products' partial sums, over 3 steps.
    const double got = rel_l2(grad_norms(w, o, 3), want),
                 bound = reorder_bound(4 * base.model.embd, 3);
    measured(sp ? "tp2.sp.pp2 gradient norms" : "tp2.pp2 gradient norms", got, bound);
    EXPECT_LE(got, bound) << "sp " << sp;
  }
}

// Every (p, m, v) with dp = 1: trains a step or is refused by check_layout before anything runs.
// A hang would end at STRATA_TIMEOUT (CTest sets 60 s) as an error naming the rank.
TEST(Pipeline, EveryShapeTrainsOrIsRefusedBeforeItStarts) {
  auto& w = mp::world();
  const int p = w.size();
  if (p < 2) GTEST_SKIP() << "a pipeline needs 2 or more ranks; gpt_parallel_np2/3/4 run it";
  int trained = 0, refused = 0;
  for (auto s : {pp::Schedule::gpipe, pp::Schedule::one_f_one_b, pp::Schedule::interleaved})
    for (int v : {1, 2})
      for (int m = 1; m <= 8; ++m) {
        TrainOptions o = tiny(2 * p);
        o.pp = p, o.schedule = s, o.virtual_stages = v, o.micro_batches = m;
        o.global_batch = 2 * m;
        o.model.ctx = 8;
        try {
          gpt::check_layout(o, p);
        } catch (const std::invalid_argument&) {
          ++refused;
          continue;
        }
        gpt::Trainer t(w, corpus(), o);
        EXPECT_TRUE(std::isfinite(t.step().loss)) << gpt::layout_name(o, p) << " m " << m;
        ++trained;
      }
  // gpipe and 1f1b take every m with v = 1; interleaved takes v = 2 with m a multiple of p.
  EXPECT_EQ(trained, 16 + 8 / p);
  EXPECT_EQ(refused, 48 - trained);
}

TEST(Layout, EveryLayoutHoldsTheOneRankModelAndSamplesTheSameText) {
  // Before any step the slices, reassembled, are the one-rank initialisation bit for bit, and a
  // sample (drawn from the reassembled model on every rank) is the same text.
  auto& w = mp::world();
  const TrainOptions base = tiny(4);
  TrainOptions one = base;
  gpt::Trainer ref(w.split(w.rank(), 0), corpus(), one);
  const std::vector<float> want = ref.parameters();
  const std::string text = ref.sample("ROMEO:", 40, 0.8f, 7);
  for (int tp : {1, 2, 4})
    for (int pp : {1, 2, 4}) {
      if (w.size() % (tp * pp)) continue;
      TrainOptions o = layout(base, tp, pp);
      o.sp = tp > 1;
      gpt::Trainer t(w, corpus(), o);
      EXPECT_TRUE(bits_equal(t.parameters(), want)) << gpt::layout_name(o, w.size());
      EXPECT_EQ(t.sample("ROMEO:", 40, 0.8f, 7), text) << gpt::layout_name(o, w.size());
    }
}

TEST(Checkpoint, SavedInOneLayoutResumesInAnotherWithTheUninterruptedLosses) {
  auto& w = mp::world();
  if (w.size() != 4)
    GTEST_SKIP() << "saves at tp2 pp2, resumes at dp4: needs 4 ranks; gpt_parallel_np4 runs it";
  const TrainOptions base = tiny(4);
  const std::string dir = shared_dir("ckpt");
  const TrainOptions dp = layout(base, 1, 1), tp_pp = layout(base, 2, 2);
  const Trained straight = train(w, dp, 6);
  const Trained same = train(w, tp_pp, 6);
  {
    gpt::Trainer t(w, corpus(), tp_pp);
    for (int s = 0; s < 3; ++s) t.step();
    t.save(dir);
  }
  auto resume = [&](const TrainOptions& o) {
    gpt::Trainer t(w, corpus(), o);
    t.load(dir);
    EXPECT_EQ(t.steps_done(), 3);
    std::vector<float> losses;
    for (int s = 0; s < 3; ++s) losses.push_back(t.step().loss);
    return losses;
  };
  // In the layout that saved: bit for bit. In another: the other layout's own rounding only.
  const std::vector<float> again = resume(tp_pp), moved = resume(dp);
  EXPECT_EQ(again, std::vector<float>(same.losses.begin() + 3, same.losses.end()));
  // Three steps in tp2.pp2 (the row-parallel products' partial sums), three in dp4 (4 ranks'
  // gradients summed in its own order): the larger reordering over 6 steps.
  const double bound = numerics::mean_bound(reorder_bound(4 * base.model.embd, 6), tokens(base));
  const double got = rel_l2(moved, std::span(straight.losses).subspan(3));
  measured("resumed in dp4 against dp4 throughout, losses", got, bound);
  EXPECT_LE(got, bound);
  // Another model is refused, naming it; a damaged file is refused, naming the damage.
  TrainOptions other = dp;
  other.model.layers = 2;
  gpt::Trainer t(w, corpus(), other);
  EXPECT_THROW(t.load(dir), std::invalid_argument);
  w.barrier().wait();
  if (w.rank() == 0) {
    const std::string file = dir + "/gpt-checkpoint.bin";
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(std::filesystem::file_size(file) - 64));  // a moment's float
    f.put('\x7f');
  }
  w.barrier().wait();
  try {
    gpt::Trainer u(w, corpus(), dp);
    u.load(dir);
    ADD_FAILURE() << "a damaged checkpoint loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
  }
  w.barrier().wait();
  if (w.rank() == 0) std::filesystem::remove_all(dir);
}

TEST(Layout, BadLayoutsAreRefusedWithOneLine) {
  auto expect = [](TrainOptions o, int ranks, const std::string& want) {
    try {
      gpt::check_layout(o, ranks);
      ADD_FAILURE() << "accepted: " << want;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), want);
    }
  };
  TrainOptions o = tiny(4);
  o.tp = 3;
  expect(o, 8, "layout tp=3 pp=1: tp*pp = 3 does not divide the 8 ranks");
  o.tp = 8;
  expect(o, 8, "--tp 8 does not divide the 4 heads");
  o.tp = 1, o.pp = 8;
  expect(o, 8, "8 pipeline stages (pp=8 x 1 virtual) but only 4 layers");
  o.pp = 2, o.virtual_stages = 2;
  expect(o, 8, "--virtual-stages 2 needs --schedule interleaved");
  o.virtual_stages = 1, o.tp = 2, o.sp = true, o.model.ctx = 15;
  expect(o, 8, "--sp: the sequence of 15 positions does not divide by tp=2");
}

}  // namespace
