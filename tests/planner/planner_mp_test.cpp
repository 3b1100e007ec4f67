// strata-plan's bytes and memory against what the trainer measures (issue 37): every layout
// validate runs on this world, dense and mixture-of-experts, two steps each; every rank compares
// its own groups' bytes and its engine's memory with the planner's prediction for its stage.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "estimate.hpp"
#include "tests/mp/mp.hpp"
#include "trainer/train/gpt_trainer.hpp"
#include "trainer/validate/layouts.hpp"
#include "trainer/validate/report_format.hpp"

namespace {

const gpt::CharCorpus& corpus() {
  static const gpt::CharCorpus c(STRATA_GPT_DATA);
  return c;
}

std::vector<gpt::TrainOptions> layouts(int experts, int ranks) {
  gpt::TrainOptions base;
  base.model = gpt::Config::named("tiny");
  base.model.layers = 4, base.model.heads = 4, base.model.vocab = corpus().vocab();
  base.model.experts = experts, base.model.top_k = 2, base.model.moe_every = 2;
  base.global_batch = 8 * ranks, base.micro_batches = 1, base.warmup = 1, base.steps = 2;
  base.max_grad_norm = 1;
  return gpt::validate_layouts("", base, ranks);
}

// Whether `got` is `want` to the rounding of a sum of doubles (validate's rule).
::testing::AssertionResult same(const char* what, double got, double want) {
  if (gpt::rep::same(got, want)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": measured " << got << ", predicted " << want;
}

TEST(PlannerAgainstTrainer, BytesPerGroupAndMemoryAreWhatEveryLayoutMeasures) {
  auto& w = mp::world();
  const int n = w.size();
  int checked = 0;
  for (int experts : {0, 4}) {
    for (const gpt::TrainOptions& o : layouts(experts, n)) {
      const std::string name = gpt::layout_name(o, n);
      gpt::Trainer t(w, corpus(), o);
      gpt::StepReport r;
      for (int s = 0; s < 2; ++s) r = t.step();  // the second: a steady step
      const int stage = w.rank() / (n / o.pp);
      const plan::Bytes b = plan::traffic_of(o, n, stage, plan::Precision::fp32);
      EXPECT_TRUE(same("tp bytes", r.tp_bus_bytes, b.tp)) << name << " rank " << w.rank();
      EXPECT_TRUE(same("pp bytes", r.pp_bytes, b.pp)) << name << " rank " << w.rank();
      EXPECT_TRUE(same("dp bytes", r.bus_bytes, b.dp)) << name << " rank " << w.rank();
      EXPECT_TRUE(same("ep bytes", r.ep_bus_bytes, b.ep)) << name << " rank " << w.rank();
      EXPECT_TRUE(same("cp bytes", r.cp_bytes, b.cp)) << name << " rank " << w.rank();
      const strata::MemoryReport got = t.engine().memory();
      const plan::Memory m = plan::memory_of(o, n, stage, plan::Precision::fp32);
      EXPECT_EQ(double(got.param_bytes), m.params) << name;
      EXPECT_EQ(double(got.grad_bytes), m.grads) << name;
      EXPECT_EQ(double(got.optimizer_bytes), m.optimizer) << name;
      ++checked;
    }
  }
  EXPECT_GE(checked, 2 * n) << "validate ran fewer layouts than expected";
}

}  // namespace
