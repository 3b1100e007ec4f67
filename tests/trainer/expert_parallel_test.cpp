// Expert parallelism of the mixture-of-experts layer (trainer/parallel/expert_parallel.hpp) under
// mpirun: every rank routes its own tokens, holds E / ranks experts, and exchanges rows with the
// others; against one layer holding every expert and every rank's tokens (computed on each rank),
// element by element.
#include "parallel/expert_parallel.hpp"

#include <cstdio>
#include <cstring>
#include <random>

#include "model/moe.hpp"
#include "tests/mp/mp.hpp"
#include "tests/numerics.hpp"
#include "tests/trainer/layout_runs.hpp"

namespace {

using layout_runs::randn;
using std::vector;

// Rows [first, first + count) of a [*, width] matrix.
vector<float> rows(const vector<float>& m, size_t first, size_t count, size_t width) {
  return {m.begin() + ptrdiff_t(first * width), m.begin() + ptrdiff_t((first + count) * width)};
}

void check_against_one_layer(double capacity) {
  auto& world = mp::world();
  const int P = world.size(), me = world.rank();
  const int B = 2, T = 6, C = 8, H = 4 * C, k = 2, E = 2 * P, El = 2, N = B * T;
  const float coef = 0.05f;
  // The model, the same on every rank: the router and every expert.
  const auto router = randn(size_t(E) * C, 0.5, 1), w1 = randn(size_t(E) * H * C, 0.3, 2),
             b1 = randn(size_t(E) * H, 0.1, 3), w2 = randn(size_t(E) * C * H, 0.2, 4),
             b2 = randn(size_t(E) * C, 0.1, 5);
  // Every rank's tokens and output gradients: rank i's are rows [i N, (i + 1) N).
  const auto x_all = randn(size_t(P) * N * C, 1, 6), dout_all = randn(size_t(P) * N * C, 1, 7);

  // One layer with every expert over every rank's rows (B P sequences). Its loss is every rank's
  // sum of dout out plus coef times each rank's aux loss: the mean over the P B sequences, times P.
  gpt::moe::Acts one(B * P, T, C, E, k);
  const gpt::moe::Experts all{w1.data(), b1.data(), w2.data(), b2.data()};
  vector<float> out_all(x_all.size()), dx_all(x_all.size(), 0.0f), drouter_all(router.size()),
      dw1(w1.size()), db1(b1.size()), dw2(w2.size()), db2(b2.size());
  gpt::moe::forward(one, out_all.data(), x_all.data(), router.data(), all, capacity);
  gpt::moe::Scratch s_all(B * P, T, C, E, k);
  gpt::moe::backward(dx_all.data(), drouter_all.data(),
                     {dw1.data(), db1.data(), dw2.data(), db2.data()}, dout_all.data(), one,
                     x_all.data(), router.data(), all, coef * float(P), false, s_all);

  // Expert parallelism: my rows, my experts [me El, (me + 1) El).
  gpt::ExpertParallel ep(world.split(0, me));
  const auto x = rows(x_all, size_t(me) * N, N, C), dout = rows(dout_all, size_t(me) * N, N, C);
  const auto mw1 = rows(w1, size_t(me) * El * H, size_t(El) * H, C),
             mb1 = rows(b1, size_t(me) * El * H, size_t(El) * H, 1),
             mw2 = rows(w2, size_t(me) * El * C, size_t(El) * C, H),
             mb2 = rows(b2, size_t(me) * El * C, size_t(El) * C, 1);
  const gpt::moe::Experts mine{mw1.data(), mb1.data(), mw2.data(), mb2.data()};
  gpt::moe::Acts a(B, T, C, E, k, P);
  vector<float> out(x.size()), dx(x.size(), 0.0f), drouter(router.size()), gw1(mw1.size()),
      gb1(mb1.size()), gw2(mw2.size()), gb2(mb2.size());
  gpt::moe::forward(a, out.data(), x.data(), router.data(), mine, capacity, &ep);
  gpt::moe::Scratch s(B, T, C, E, k, P);
  gpt::moe::backward(dx.data(), drouter.data(), {gw1.data(), gb1.data(), gw2.data(), gb2.data()},
                     dout.data(), a, x.data(), router.data(), mine, coef, false, s, &ep);

  // Rows are computed alike and an expert sees its rows in the one layer's order: the outputs
  // and my experts' gradients are the one layer's, bit for bit. The input gradients add the
  // router's product (dx += d logits router_w) over N rows here, P N there, and OpenBLAS
  // rounds that product's sum into dx differently for some row counts (3 ranks: E = 6): bit for
  // bit at 1, 2 and 4 ranks, within the rounding of its E + k terms otherwise.
  EXPECT_EQ(out, rows(out_all, size_t(me) * N, N, C)) << "rank " << me;
  const double dx_diff = numerics::rel_l2(dx, rows(dx_all, size_t(me) * N, N, C));
  EXPECT_LE(dx_diff, numerics::reorder_bound(E + k)) << "rank " << me;
  if (me == 0) std::printf("[ measured ] dx: %.2e of one layer's\n", dx_diff);
  EXPECT_EQ(gw1, rows(dw1, size_t(me) * El * H, size_t(El) * H, C)) << "rank " << me;
  EXPECT_EQ(gb1, rows(db1, size_t(me) * El * H, size_t(El) * H, 1)) << "rank " << me;
  EXPECT_EQ(gw2, rows(dw2, size_t(me) * El * C, size_t(El) * C, H)) << "rank " << me;
  EXPECT_EQ(gb2, rows(db2, size_t(me) * El * C, size_t(El) * C, 1)) << "rank " << me;
  // The router's gradient is a sum over every rank's rows: summed over the ranks here, in
  // another order than one layer's sgemm sums them (tests/numerics.hpp).
  world.all_reduce(strata::buffer(drouter), strata::ReduceOp::sum).wait();
  EXPECT_LE(numerics::rel_l2(drouter, drouter_all), numerics::reorder_bound(double(P) * N, 1))
      << "router_w";
  const long dropped = a.r.dropped;
  std::vector<int64_t> total{dropped};
  world.all_reduce(strata::buffer(total), strata::ReduceOp::sum).wait();
  EXPECT_EQ(total[0], one.r.dropped) << "every rank drops what the one layer drops";
  if (capacity > 0) {
    EXPECT_GT(one.r.dropped, 0) << "the case must drop something";
  }
}

TEST(ExpertParallel, MatchesOneLayerWithEveryExpertDropless) { check_against_one_layer(0); }
TEST(ExpertParallel, MatchesOneLayerWithEveryExpertWithCapacity) { check_against_one_layer(0.75); }

}  // namespace
