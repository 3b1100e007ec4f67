// Context parallelism under mpirun (gpt_parallel_np2/3/4): the attention alone with cp = the
// world (each rank holds chunks r and 2 cp - 1 - r of every sequence; its output and its rows'
// q, k, v gradients, ring and all-to-all, against unsplit attention of the whole sequence,
// element by element), a mixture of experts' routing of sequences split over cp against the
// whole sequences', and the trainer at cp = the world and beside dp, against one rank.
#include "parallel/context_parallel.hpp"

#include <cmath>
#include <cstdio>
#include <random>

#include "model/gpt_layers.hpp"
#include "model/moe.hpp"
#include "tests/mp/mp.hpp"
#include "tests/numerics.hpp"
#include "tests/trainer/layout_runs.hpp"
#include "trainer/validate/layout_formulas.hpp"

namespace {

using layout_runs::randn;
using std::vector;

// The largest |a - b| over the elements, relative to the larger of |b| and b's root mean square
// (so that near-zero elements are judged on the tensor's scale).
double worst_element(const vector<float>& a, const vector<float>& b) {
  double ss = 0;
  for (float x : b) ss += double(x) * x;
  const double rms = std::sqrt(ss / double(b.size()));
  double worst = a.size() == b.size() ? 0 : INFINITY;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst =
        std::max(worst, std::fabs(double(a[i]) - b[i]) / std::max(std::fabs(double(b[i])), rms));
  return worst;
}

// This rank's rows of a [B, T, width] tensor: its local positions, in local order.
vector<float> my_rows(const vector<float>& whole, int B, int T, int width, int me, int P) {
  const int Tl = T / P;
  vector<float> out(size_t(B) * Tl * width);
  for (int b = 0; b < B; ++b)
    for (int p = 0; p < Tl; ++p) {
      const size_t pos = size_t(gpt::chunk_position(me, P, p, Tl));
      std::copy_n(whole.data() + (size_t(b) * T + pos) * width, width,
                  out.data() + (size_t(b) * Tl + p) * width);
    }
  return out;
}

void check(gpt::CpComm mode) {
  auto& world = mp::world();
  const int P = world.size(), me = world.rank();
  // Chunks of 5 positions (odd: no power-of-two luck), 12 heads (divide by 2, 3 and 4).
  const int B = 2, c = 5, T = 2 * P * c, Tl = T / P, C = 48, NH = 12;
  const auto qkv = randn(size_t(B) * T * 3 * C, 1.0, 11), dout = randn(size_t(B) * T * C, 1.0, 12);
  vector<float> out(size_t(B) * T * C), att(size_t(B) * NH * T * T), dqkv(qkv.size()),
      scratch(size_t(T) * T);
  gpt::layers::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
  gpt::layers::attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH,
                                  scratch.data());

  auto cp = gpt::make_context_parallel(world, mode);
  const auto q = my_rows(qkv, B, T, 3 * C, me, P), dy = my_rows(dout, B, T, C, me, P);
  vector<float> state(cp->state_floats(B, Tl, C, NH)), y(size_t(B) * Tl * C), dq(q.size());
  cp->attention_forward(y.data(), state.data(), q.data(), B, Tl, C, NH);
  cp->attention_backward(dq.data(), dy.data(), q.data(), y.data(), state.data(), B, Tl, C, NH);
  // A row's output sums T probabilities times values, its gradients T terms, in another order
  // (blocks merged by rescaling, or the same kernel on fewer heads).
  const double bound = numerics::reorder_bound(T);
  const double fy = worst_element(y, my_rows(out, B, T, C, me, P));
  const double fd = worst_element(dq, my_rows(dqkv, B, T, 3 * C, me, P));
  std::vector<double> mine{fy, fd}, all(2 * size_t(P));
  world.all_gather(strata::buffer(mine), strata::buffer(all)).wait();
  double wy = 0, wd = 0;
  for (int r = 0; r < P; ++r) wy = std::max(wy, all[2 * r]), wd = std::max(wd, all[2 * r + 1]);
  if (me == 0)
    std::printf("[ measured ] cp%d %s: output %.2e, q/k/v gradients %.2e (bound %.2e)\n", P,
                std::string(gpt::cp_comm_name(mode)).c_str(), wy, wd, bound);
  EXPECT_LE(fy, bound) << "rank " << me;
  EXPECT_LE(fd, bound) << "rank " << me;
  EXPECT_GT(cp->take_bytes(), 0.0);
}

TEST(ContextParallel, RingAttentionEqualsUnsplitAttention) {
  if (mp::world().size() < 2) GTEST_SKIP() << "context parallelism needs 2 or more ranks";
  check(gpt::CpComm::p2p);
}

TEST(ContextParallel, UlyssesAttentionEqualsUnsplitAttention) {
  if (mp::world().size() < 2) GTEST_SKIP() << "context parallelism needs 2 or more ranks";
  check(gpt::CpComm::a2a);
}

// Routing each rank's positions with the cp group routes, drops and weighs what routing the
// whole sequences on one rank does: loads and the aux loss per whole sequence, the capacity
// ranked over every rank's positions (ties to the earlier position: the router's logits are
// rounded to 1/8 so that equal probabilities occur).
void check_routing(int E, int k, double capacity) {
  auto& world = mp::world();
  const int P = world.size(), me = world.rank();
  const int B = 3, c = 5, T = 2 * P * c, Tl = T / P;
  vector<float> logits = randn(size_t(B) * T * E, 1.0, 21);
  for (float& z : logits) z = std::round(z * 8) / 8;
  gpt::moe::Routing whole, mine;
  gpt::moe::route(whole, logits.data(), B, T, E, k, capacity);
  auto cp = gpt::make_context_parallel(world, gpt::CpComm::p2p);
  gpt::moe::route(mine, my_rows(logits, B, T, E, me, P).data(), B, Tl, E, k, capacity, cp.get());
  const std::string what = "E " + std::to_string(E) + " k " + std::to_string(k) + " capacity " +
                           std::to_string(capacity) + ", rank " + std::to_string(me);
  EXPECT_EQ(mine.load, whole.load) << what;
  EXPECT_NEAR(mine.aux, whole.aux, 1e-12 * whole.aux) << what;  // sums over ranks, reordered
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < Tl; ++t) {
      const size_t n = size_t(b) * Tl + size_t(t),
                   g = size_t(b) * T + size_t(gpt::chunk_position(me, P, t, Tl));
      for (int j = 0; j < k; ++j) {
        const size_t s = n * size_t(k) + size_t(j), sg = g * size_t(k) + size_t(j);
        ASSERT_EQ(mine.expert[s], whole.expert[sg]) << what << " position " << g;
        EXPECT_EQ(mine.gate[s], whole.gate[sg]) << what << " position " << g;
        EXPECT_EQ(mine.kept[s], whole.kept[sg]) << what << " position " << g << " choice " << j;
      }
    }
  std::vector<double> dropped{double(mine.dropped)};
  world.all_reduce(strata::buffer(dropped), strata::ReduceOp::sum).wait();
  EXPECT_EQ(dropped[0], double(whole.dropped)) << what;
  if (capacity > 0) {
    EXPECT_GT(whole.dropped, 0) << what << ": the case drops nothing";
  }
}

TEST(ContextParallel, RoutesExpertsAsWholeSequencesDo) {
  if (mp::world().size() < 2) GTEST_SKIP() << "context parallelism needs 2 or more ranks";
  check_routing(4, 2, 0);
  check_routing(4, 1, 1.0);
  check_routing(8, 2, 0.5);
}

TEST(ContextParallel, TrainsAsOneRankDoes) {
  // 12 heads and 24 positions: cp = 2, 3, 4 split them, in both modes. Every gradient sums the
  // batch's rows (per rank, then over cp x dp: another order), attention's its blocks' terms.
  using namespace layout_runs;
  auto& w = mp::world();
  if (w.size() < 2) GTEST_SKIP() << "context parallelism needs 2 or more ranks";
  constexpr int kSteps = 8;
  TrainOptions base = tiny(2);
  base.model.heads = 12, base.model.embd = 48, base.model.ctx = 24;
  const Trained ref = reference(base, kSteps);
  for (int cp : {2, w.size()}) {
    if (w.size() % cp) continue;
    for (gpt::CpComm mode : {gpt::CpComm::p2p, gpt::CpComm::a2a}) {
      TrainOptions o = base;
      o.cp = cp, o.cp_comm = mode;
      const std::string what = gpt::layout_name(o, w.size());
      gpt::Trainer t(w, corpus(), o);
      Trained got;
      gpt::StepReport last;
      for (int s = 0; s < kSteps; ++s) got.losses.push_back((last = t.step()).loss);
      got.params = t.parameters();
      EXPECT_TRUE(t.replicas_identical()) << what;
      const double bound = reorder_bound(tokens(o), kSteps);
      const double losses = rel_l2(got.losses, ref.losses);
      const auto worst = numerics::worst_tensor(got.params, ref.params, gpt::param_specs(o.model));
      measured(what + ": losses", losses, numerics::mean_bound(bound, tokens(o)));
      measured(what + ": worst tensor (" + worst.tensor + ")", worst.rel, bound);
      if (w.rank() == 0)
        std::printf("[ measured ] %s: losses %s\n", what.c_str(),
                    got.losses == ref.losses ? "bit-identical" : "not bit-identical");
      EXPECT_LE(losses, numerics::mean_bound(bound, tokens(o))) << what;
      EXPECT_LE(worst.rel, bound) << what << " " << worst.tensor;
      // Attention's traffic is what the formula says, and it was timed.
      EXPECT_DOUBLE_EQ(last.cp_bytes, gpt::traffic_formula(o, w.size(), 0).cp_bytes) << what;
      EXPECT_GT(last.axes.cp.comm, 0.0) << what;
    }
    if (cp == w.size()) break;
  }
}

}  // namespace
