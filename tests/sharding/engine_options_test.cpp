// What ZeroEngine refuses and what its optimizer options do, on every world size: AdamW options
// out of range, tensors and units it lacks, and clipping by a norm summed over a model-parallel
// group that skips replicas.
#include <cmath>

#include "model.hpp"
#include "tests/mp/mp.hpp"

namespace {
using strata::ZeroEngine;
using strata::ZeroOptions;

// Options that would train to NaN (beta = 1: Adam's bias correction 1 - 1^t = 0) or make no
// sense are refused when the engine is made, naming the field, its value and the range.
TEST(Zero, AdamWOptionsOutsideTheirRangesAreRefused) {
  const shtest::Mlp m;
  const float nan = std::nanf(""), inf = INFINITY;
  const std::pair<float strata::AdamWOptions::*, std::string> fields[] = {
      {&strata::AdamWOptions::lr, "lr"},
      {&strata::AdamWOptions::beta1, "beta1"},
      {&strata::AdamWOptions::beta2, "beta2"},
      {&strata::AdamWOptions::eps, "eps"},
      {&strata::AdamWOptions::weight_decay, "weight_decay"},
      {&strata::AdamWOptions::max_grad_norm, "max_grad_norm"}};
  for (const auto& [field, name] : fields) {
    for (float bad :
         {nan, inf, -1.0f, name.starts_with("beta") ? 1.0f : nan, name == "eps" ? 0.0f : nan}) {
      ZeroOptions o = shtest::engine_options(1);
      o.adamw.*field = bad;
      try {
        ZeroEngine e(mp::world(), m.specs(), o);
        ADD_FAILURE() << "engine built with adamw." << name << " = " << bad;
      } catch (const strata::Error& e) {
        EXPECT_EQ(e.code(), strata::ErrorCode::invalid_argument) << e.what();
        EXPECT_NE(std::string(e.what()).find("adamw." + name + " = "), std::string::npos)
            << e.what();
      }
    }
  }
  ZeroOptions edges = shtest::engine_options(1);  // the ends of the ranges that are allowed
  edges.adamw.beta1 = edges.adamw.beta2 = 0.0f;
  edges.adamw.lr = edges.adamw.weight_decay = edges.adamw.max_grad_norm = 0.0f;
  ZeroEngine accepted(mp::world(), m.specs(), edges);
}

TEST(Zero, BadInputIsAnErrorNamingIt) {
  auto& w = mp::world();
  shtest::Mlp m;
  ZeroEngine e(w, m.specs(), shtest::engine_options(3));
  try {
    e.set_param(0, std::vector<float>(3));
    FAIL() << "no error";
  } catch (const strata::Error& err) {
    EXPECT_NE(std::string(err.what()).find("layer0.w"), std::string::npos) << err.what();
  }
  EXPECT_THROW(e.param(0), strata::Error);  // not gathered
  EXPECT_THROW(e.gather(99), strata::Error);
  EXPECT_THROW(ZeroEngine(w, m.specs(), shtest::engine_options(4)), strata::Error);
}
TEST(Zero, ClippingSumsTheNormOverTheModelParallelGroupAndSkipsReplicas) {
  // Each rank holds its own slice of a model (its own one-rank engine): "mine" with gradient
  // r + 1 everywhere, and "replica", a copy another rank counts (gradient 100, outside the norm).
  // The norm is sqrt(sum over ranks of 4 (r + 1)^2); with eps = 1 AdamW's first step shows the
  // clipping scale: p = -lr * g s / (|g s| + 1).
  auto& w = mp::world();
  strata::Communicator alone = w.split(w.rank(), 0);
  for (int stage : {0, 3}) {
    ZeroOptions o = shtest::engine_options(stage);
    o.adamw.max_grad_norm = 1.0f;
    o.adamw.eps = 1.0f;
    o.adamw.weight_decay = 0.0f;
    o.grad_norm_group = w;
    std::vector<strata::TensorSpec> specs{{"mine", {4}, 0}, {"replica", {4}, 0, false}};
    ZeroEngine e(alone, specs, o);
    e.set_param(0, std::vector<float>(4, 0.0f));
    e.set_param(1, std::vector<float>(4, 0.0f));
    e.begin_backward();
    e.gather(0);
    for (float& g : e.grad(0)) g = float(w.rank() + 1);
    for (float& g : e.grad(1)) g = 100.0f;
    e.ready(0);
    e.ready(1);
    e.release(0);
    e.step();
    double sq = 0;
    for (int r = 0; r < w.size(); ++r) sq += 4.0 * (r + 1) * (r + 1);
    const double s = 1.0 / (std::sqrt(sq) + 1e-6);
    const auto p = e.full_params();
    for (size_t i = 0; i < 8; ++i) {
      const double g = (i < 4 ? w.rank() + 1 : 100.0) * s;
      // A float32 AdamW step is a dozen rounded operations from the clipped gradient: each
      // within u of exact, so the result within 16 u of it, relative (x4 margin: 64 u).
      const double want = -o.adamw.lr * g / (g + 1.0);
      EXPECT_NEAR(p[i], want, 64 * 0x1p-24 * std::fabs(want))
          << "stage " << stage << " element " << i;
    }
  }
}
}  // namespace
