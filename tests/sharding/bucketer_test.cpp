// GradBucketer on every world size: the bucket plan follows the caps, buckets launch in plan
// order as soon as they are complete, and all-reduce / reduce-scatter (fp32 and bf16) average.
#include <algorithm>
#include <random>

#include "model.hpp"
#include "tests/mp/mp.hpp"

namespace {
using strata::BucketOptions;
using strata::FlatLayout;
using strata::GradBucketer;
using strata::GradReduction;

// Gradient element k of tensor t on `rank`: small integers, exact in bf16 and in any sum here.
float grad_value(int rank, size_t t, size_t k) { return float((rank + 1) * int((k + t) % 5) - 2); }

float expected_avg(int n, size_t t, size_t k) {
  float sum = 0;
  for (int r = 0; r < n; ++r) sum += grad_value(r, t, k);
  return sum / float(n);
}

BucketOptions small_caps(bool bf16 = false) {
  BucketOptions o;
  o.cap_bytes = 260;  // about two units of the test model per bucket
  o.first_cap_bytes = 100;
  o.bf16 = bf16;
  return o;
}

// Writes every gradient and marks it ready, in `order`.
void run_backward(GradBucketer& b, const FlatLayout& l, const std::vector<size_t>& order,
                  int rank) {
  for (size_t t : order) {
    auto g = b.grad(t);
    for (size_t k = 0; k < g.size(); ++k) g[k] = grad_value(rank, t, k);
    b.ready(t);
  }
  b.finish();
  (void)l;
}

std::vector<size_t> backward_order(const FlatLayout& l) {
  std::vector<size_t> o;
  for (size_t t = l.tensors().size(); t-- > 0;) o.push_back(t);
  return o;
}

// Checks averaged gradients: the full buffer (all_reduce) or this rank's blocks (reduce_scatter).
void check_result(GradBucketer& b, const FlatLayout& l, GradReduction mode, int rank) {
  const int n = l.world_size();
  for (size_t t = 0; t < l.tensors().size(); ++t) {
    const size_t u = size_t(l.tensors()[t].unit), off = l.tensor_offset(t);
    for (size_t k = 0; k < l.tensors()[t].numel(); ++k) {
      const size_t flat = off + k;
      float got;
      if (mode == GradReduction::all_reduce) {
        got = b.full_grads()[flat];
      } else {
        const size_t in_unit = flat - l.unit_offset(u);
        if (in_unit / l.block_numel(u) != size_t(rank)) continue;  // another rank's block
        got = b.shard_grads()[l.shard_offset(u) + in_unit % l.block_numel(u)];
      }
      ASSERT_NEAR(got, expected_avg(n, t, k), 1e-6) << "tensor " << t << " element " << k;
    }
  }
}

TEST(Bucketer, PlanFollowsTheCapsInBackwardOrder) {
  auto& w = mp::world();
  FlatLayout l(shtest::Mlp{}.specs(), w.size());
  GradBucketer b(w, l, GradReduction::all_reduce, small_caps());
  const auto& bs = b.buckets();
  ASSERT_GE(bs.size(), 2u);
  size_t next_unit = l.num_units();
  for (size_t i = 0; i < bs.size(); ++i) {
    const size_t cap = i == 0 ? 100 : 260;
    EXPECT_EQ(bs[i].last_unit + 1, next_unit) << "bucket " << i << " not contiguous";
    next_unit = bs[i].first_unit;
    size_t bytes = 0;
    for (size_t u = bs[i].first_unit; u <= bs[i].last_unit; ++u) bytes += 4 * l.unit_numel(u);
    EXPECT_EQ(bs[i].bytes, bytes);
    if (bs[i].first_unit != bs[i].last_unit) {
      EXPECT_LE(bytes, cap) << "bucket " << i;
    }
    if (bs[i].first_unit > 0) {  // greedy: the next unit did not fit
      EXPECT_GT(bytes + 4 * l.unit_numel(bs[i].first_unit - 1), cap) << "bucket " << i;
    }
  }
  EXPECT_EQ(next_unit, 0u);
  // The first bucket is the last unit alone (84+ bytes; two would pass 100).
  EXPECT_EQ(bs[0].first_unit, l.num_units() - 1);
  // Defaults: 25 MiB and 1 MiB hold this model in one bucket.
  GradBucketer d(w, l, GradReduction::all_reduce);
  EXPECT_EQ(d.buckets().size(), 1u);
}

TEST(Bucketer, EachBucketLaunchesAsSoonAsItsLastGradientIsReady) {
  auto& w = mp::world();
  FlatLayout l(shtest::Mlp{}.specs(), w.size());
  for (auto mode : {GradReduction::all_reduce, GradReduction::reduce_scatter}) {
    GradBucketer b(w, l, mode, small_caps());
    for (int rep = 0; rep < 2; ++rep) {  // the bucketer rearms after finish()
      run_backward(b, l, backward_order(l), w.rank());
      const auto& ls = b.launches();
      ASSERT_EQ(ls.size(), b.buckets().size());
      size_t cumulative = 0;
      for (size_t i = 0; i < ls.size(); ++i) {
        const auto& bk = b.buckets()[i];
        cumulative += l.unit_last_tensor(bk.last_unit) - l.unit_first_tensor(bk.first_unit);
        EXPECT_EQ(ls[i].bucket, i);
        EXPECT_EQ(ls[i].ready_tensors, cumulative) << "bucket " << i << " launched late or early";
      }
      check_result(b, l, mode, w.rank());
    }
  }
}

TEST(Bucketer, RanksMarkingInDifferentOrdersStillLaunchInPlanOrder) {
  auto& w = mp::world();
  FlatLayout l(shtest::Mlp{}.specs(), w.size());
  for (auto mode : {GradReduction::all_reduce, GradReduction::reduce_scatter}) {
    GradBucketer b(w, l, mode, small_caps());
    std::vector<size_t> order = backward_order(l);
    std::mt19937 rng(unsigned(17 + w.rank()));
    std::shuffle(order.begin(), order.end(), rng);
    run_backward(b, l, order, w.rank());
    for (size_t i = 0; i < b.launches().size(); ++i) EXPECT_EQ(b.launches()[i].bucket, i);
    check_result(b, l, mode, w.rank());
  }
}

TEST(Bucketer, Bf16CommunicationAveragesInFp32) {
  auto& w = mp::world();
  FlatLayout l(shtest::Mlp{}.specs(), w.size());
  for (auto mode : {GradReduction::all_reduce, GradReduction::reduce_scatter}) {
    GradBucketer b(w, l, mode, small_caps(true));
    run_backward(b, l, backward_order(l), w.rank());
    check_result(b, l, mode, w.rank());
    if (mode == GradReduction::all_reduce) {
      auto g = b.full_grads();
      EXPECT_TRUE(mp::identical_on_all_ranks(w, g.data(), g.size_bytes()));
    }
  }
}

TEST(Bucketer, ReduceScatterKeepsOnlyTheShard) {
  auto& w = mp::world();
  FlatLayout l(shtest::Mlp{}.specs(), w.size());
  GradBucketer rs(w, l, GradReduction::reduce_scatter, small_caps());
  GradBucketer ar(w, l, GradReduction::all_reduce, small_caps());
  EXPECT_EQ(rs.grad_bytes(), 4 * l.shard_numel());
  EXPECT_EQ(ar.grad_bytes(), 4 * l.padded_numel());
  run_backward(rs, l, backward_order(l), w.rank());
  // Staging holds at most a bucket's full gradient plus its packed copy, never the whole model
  // (once it spans more than two buckets).
  size_t biggest = 0;
  for (auto& bk : rs.buckets()) biggest = std::max(biggest, bk.bytes);
  EXPECT_LE(rs.peak_staging_bytes(), 4 * l.padded_numel());
  EXPECT_GE(rs.peak_staging_bytes(), biggest);
}

TEST(Bucketer, MisuseIsAnErrorNamingTheTensor) {
  auto& w = mp::world();
  FlatLayout l(shtest::Mlp{}.specs(), w.size());
  GradBucketer b(w, l, GradReduction::reduce_scatter, small_caps());
  try {
    b.ready(0);  // never written
    FAIL() << "no error";
  } catch (const strata::Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer0.w"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(w.rank())), std::string::npos);
  }
  EXPECT_THROW(b.grad(99), strata::Error);
  if (w.size() > 1) {
    FlatLayout other(shtest::Mlp{}.specs(), w.size() + 1);
    EXPECT_THROW(GradBucketer(w, other, GradReduction::all_reduce), strata::Error);
  }
}
}  // namespace
