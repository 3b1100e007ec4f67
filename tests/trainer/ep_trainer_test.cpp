// Expert parallelism in the trainer under mpirun (gpt_parallel_np2/3/4), against one rank: a
// mixture-of-experts model trained at ep2, ep3, ep4 (beside dp, under ZeRO-3, with a pipeline,
// with tp and sp, with cp, dropless and with a capacity), and at cp2 and cp4 without ep, gives
// the one-rank losses and parameters;
// clipping's norm counts the dense parameters once and every expert; a checkpoint written at ep2
// resumes at ep1, ep2 and ep4.
#include <filesystem>

#include "tests/trainer/layout_runs.hpp"
#include "trainer/validate/layout_formulas.hpp"

namespace {

using namespace layout_runs;

// The tiny model with E experts in every other block (4 layers: blocks 0 and 2).
TrainOptions moe(int E, int k, double capacity) {
  TrainOptions o = tiny(4);
  o.model.experts = E, o.model.top_k = k, o.model.capacity_factor = capacity;
  o.model.moe_every = 2;
  return o;
}

TrainOptions with_ep(TrainOptions o, int ep, int stage = 0, int pp = 1, int tp = 1,
                     bool sp = false) {
  o.ep = ep, o.stage = stage, o.pp = pp, o.tp = tp, o.sp = sp;
  o.micro_batches *= pp * tp;  // validate's rule: micro-batches of one size in every layout
  return o;
}

// The largest relative difference of any one loss: the criterion (1e-5).
double max_rel(const std::vector<float>& a, const std::vector<float>& ref) {
  double worst = a.size() == ref.size() ? 0 : 1e30;
  for (size_t i = 0; i < std::min(a.size(), ref.size()); ++i)
    worst = std::max(worst, std::fabs(double(a[i]) - ref[i]) / std::fabs(double(ref[i])));
  return worst;
}

constexpr double kLossTolerance = 1e-5;
constexpr int kSteps = 10;

TEST(ExpertParallel, TrainsAsOneRankDoes) {
  // Routing is discrete: the experts' rows arrive from every rank, in rank order, so each expert
  // sees them in the one-rank order and the layer's outputs are the same bits; the dense
  // gradients' average over ep and dp, and the experts' sum over ranks, reorder sums (measured
  // and printed). Capacity dropping runs on ep2 and ep4: averaging over 3 ranks rounds unlike
  // one rank's accumulation over 3 micro-batches, and a near-tie in a capacity ranking then
  // flips (dp3 alone does the same).
  auto& w = mp::world();
  struct Case {
    TrainOptions o;
    const char* what;
  };
  std::vector<Case> cases;
  for (int ep = 2; ep <= w.size(); ++ep) {
    if (w.size() % ep) continue;
    const int E = 2 * ep;
    cases.push_back({with_ep(moe(E, 2, 0), ep), "dropless top-2"});
    if ((ep & (ep - 1)) == 0) cases.push_back({with_ep(moe(E, 1, 1.0), ep), "capacity 1, top-1"});
    if (w.size() / ep > 1) cases.push_back({with_ep(moe(E, 2, 0), ep, 3), "dropless, ZeRO-3"});
    if (w.size() % (2 * ep) == 0) {
      cases.push_back({with_ep(moe(E, 1, 1.0), ep, 0, 2), "capacity 1, top-1, 1F1B"});
      cases.push_back({with_ep(moe(E, 2, 0), ep, 0, 1, 2), "dropless top-2, tp2"});
      cases.push_back({with_ep(moe(E, 1, 1.0), ep, 0, 1, 2, true), "capacity 1, top-1, tp2.sp"});
    }
  }
  // Context parallelism under the experts, with and without ep: routing sums each sequence's
  // loads over cp and ranks a capacity over every cp rank's positions (cp shares the sequences:
  // no more micro-batches).
  for (int cp = 2; cp <= w.size(); cp *= 2) {
    if (w.size() % cp) continue;
    TrainOptions o = moe(4, 2, 0);
    o.cp = cp;
    cases.push_back({o, "dropless top-2"});
    o = moe(4, 1, 1.0);
    o.cp = cp, o.cp_comm = gpt::CpComm::a2a;
    cases.push_back({o, "capacity 1, top-1"});
    if (w.size() % (2 * cp) == 0) {
      o = with_ep(moe(4, 1, 1.0), 2);
      o.cp = cp;
      cases.push_back({o, "capacity 1, top-1"});
      o = with_ep(moe(4, 2, 0), 1, 0, 1, 2);
      o.cp = cp;
      cases.push_back({o, "dropless top-2, tp2"});
    }
  }
  ASSERT_FALSE(cases.empty());
  for (Case& c : cases) {
    c.o.model.vocab = corpus().vocab();
    const std::string what = gpt::layout_name(c.o, w.size()) + " " + c.what;
    TrainOptions one = c.o;
    one.ep = one.pp = one.tp = one.cp = 1, one.sp = false, one.stage = 0;
    const Trained ref = reference(one, kSteps);
    gpt::Trainer t(w, corpus(), c.o);
    Trained got;
    gpt::StepReport last;
    for (int s = 0; s < kSteps; ++s) got.losses.push_back((last = t.step()).loss);
    got.params = t.parameters();
    // Every assignment routed once over the world (tp ranks route their shares of the
    // sequences, never the same token twice): the experts' tokens and the dropped make T k.
    // The exchanges moved what the routing says they must (formula: docs/trainer.md).
    for (const auto& x : last.experts) {
      EXPECT_DOUBLE_EQ(x.mean * c.o.model.experts + x.dropped, tokens(c.o) * c.o.model.top_k)
          << what << " block " << x.layer;
      EXPECT_EQ(x.a2a_bytes > 0, c.o.ep > 1) << what << " block " << x.layer;
      EXPECT_DOUBLE_EQ(x.a2a_bytes, x.a2a_bytes_formula) << what << " block " << x.layer;
    }
    EXPECT_EQ(last.axes.ep.comm > 0, c.o.ep > 1) << what;
    EXPECT_EQ(last.axes.tp.comm > 0, c.o.tp > 1) << what;
    EXPECT_EQ(last.axes.cp.comm > 0, c.o.cp > 1) << what;
    EXPECT_DOUBLE_EQ(last.cp_bytes, gpt::traffic_formula(c.o, w.size(), 0).cp_bytes) << what;
    EXPECT_TRUE(t.replicas_identical()) << what;
    const double losses = max_rel(got.losses, ref.losses);
    // Every gradient sums the global batch's rows (the experts': those routed to them), here in
    // another order (per rank, then over ranks), over kSteps steps.
    const double param_bound = reorder_bound(tokens(c.o), kSteps);
    const auto worst = numerics::worst_tensor(got.params, ref.params, gpt::param_specs(c.o.model));
    measured(what + ": losses, largest relative difference", losses, kLossTolerance);
    measured(what + ": worst tensor (" + worst.tensor + ")", worst.rel, param_bound);
    if (w.rank() == 0)
      std::printf("[ measured ] %s: losses %s, parameters %s\n", what.c_str(),
                  got.losses == ref.losses ? "bit-identical" : "not bit-identical",
                  bits_equal(got.params, ref.params) ? "bit-identical" : "not bit-identical");
    EXPECT_LE(losses, kLossTolerance) << what;
    EXPECT_LE(worst.rel, param_bound) << what << " " << worst.tensor;
  }
}

TEST(ExpertParallel, ClippingCountsTheDenseParametersOnceAndEveryExpert) {
  // The norm clipping sees, step by step, against one rank's: counting a dense tensor on every
  // ep rank, an expert on one only, or experts' gradients unscaled by 1 / ep (each holds every
  // rank's tokens, summed) all change it far beyond rounding.
  auto& w = mp::world();
  const int ep = w.size() % 2 == 0 ? 2 : w.size();
  TrainOptions base = moe(2 * ep, 2, 0);
  TrainOptions one = base;
  one.micro_batches *= w.size();
  const std::vector<float> want = grad_norms(w.split(w.rank(), 0), one, 3);
  ASSERT_GT(want[0], 0.0f);
  // With a pipeline too, where the tied embedding's gradient is reduced across its ends before
  // its average over ep (a tied group spanning ep would count it ep times).
  std::vector<TrainOptions> layouts{with_ep(base, ep)};
  if (w.size() % (2 * ep) == 0) {
    layouts.push_back(with_ep(base, ep, 0, 2));
    layouts.push_back(with_ep(base, ep, 0, 1, 2));  // router and experts whole over tp
  }
  for (const TrainOptions& o : layouts) {
    // Squared norms of every rank's slices summed in another order, gradients averaged in
    // another.
    const double got = rel_l2(grad_norms(w, o, 3), want),
                 bound = reorder_bound(4 * base.model.embd, 3);
    measured(gpt::layout_name(o, w.size()) + " gradient norms", got, bound);
    EXPECT_LE(got, bound) << gpt::layout_name(o, w.size());
  }
}

TEST(ExpertParallel, ACheckpointWrittenAtEp2ResumesAtEp1Ep2AndEp4) {
  auto& w = mp::world();
  if (w.size() != 4)
    GTEST_SKIP() << "saves at ep2.dp2, resumes at dp4 and ep4: needs 4 ranks; gpt_parallel_np4";
  const TrainOptions base = moe(4, 2, 0);
  const std::string dir = shared_dir("ep-ckpt");
  const TrainOptions ep1 = base, ep2 = with_ep(base, 2), ep4 = with_ep(base, 4);
  {
    gpt::Trainer t(w, corpus(), ep2);
    for (int s = 0; s < 3; ++s) t.step();
    t.save(dir);
  }
  for (const TrainOptions& o : {ep1, ep2, ep4}) {
    const Trained straight = train(w, o, 6);
    gpt::Trainer t(w, corpus(), o);
    t.load(dir);
    EXPECT_EQ(t.steps_done(), 3);
    std::vector<float> losses;
    for (int s = 0; s < 3; ++s) losses.push_back(t.step().loss);
    const std::vector<float> want(straight.losses.begin() + 3, straight.losses.end());
    const std::string what = "saved at ep2.dp2, resumed at " + gpt::layout_name(o, w.size());
    measured(what + ", losses", max_rel(losses, want), kLossTolerance);
    if (o.ep == 2)
      EXPECT_EQ(losses, want) << what;  // the same layout: bit for bit
    else
      EXPECT_LE(max_rel(losses, want), kLossTolerance) << what;
  }
  w.barrier().wait();
  if (w.rank() == 0) std::filesystem::remove_all(dir);
}

}  // namespace
