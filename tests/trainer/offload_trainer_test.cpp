// Offload in the trainer under mpirun (gpt_parallel_np2/3/4): every ZeRO stage trains bit for
// bit as with the moments (and at stage 3 the parameter shard; under SGD that alone) in memory,
// with a window far smaller than the state; a directory that cannot hold the file stops the
// trainer before its first step, naming it.
#include <filesystem>

#include "tests/trainer/layout_runs.hpp"

namespace {

using namespace layout_runs;

TEST(Offload, EveryStageTrainsBitForBitAsWithTheStateInMemory) {
  // 4: stage 3 with the parameter shard offloaded; 5: the same under SGD (no moments).
  for (int stage = 0; stage <= 5; ++stage) {
    TrainOptions o = tiny();
    o.stage = std::min(stage, 3);
    if (stage == 5) o.rule = strata::UpdateRule::sgd;
    const Trained mem = train(mp::world(), o, 4);
    // SGD's file, the parameter shard alone, is a third of AdamW's: a window to match.
    const size_t window = stage == 5 ? 4 << 10 : 16 << 10;
    o.offload = {std::filesystem::temp_directory_path().string(), window, stage >= 4};
    gpt::Trainer t(mp::world(), corpus(), o);
    const strata::MemoryReport r = t.engine().memory();
    EXPECT_LE(r.optimizer_bytes, window);
    const size_t offloaded = stage == 5 ? r.offloaded_param_bytes : r.offloaded_optimizer_bytes;
    EXPECT_GT(offloaded, 4 * r.optimizer_bytes) << "the window holds a fraction";
    if (stage == 5) {
      EXPECT_EQ(r.offloaded_optimizer_bytes, 0u);
    }
    Trained off;
    for (int s = 0; s < 4; ++s) off.losses.push_back(t.step().loss);
    off.params = t.parameters();
    EXPECT_EQ(off.losses, mem.losses) << "stage " << stage;
    EXPECT_TRUE(bits_equal(off.params, mem.params)) << "stage " << stage;
  }
}

TEST(Offload, AnUnusableDirectoryStopsTheTrainerBeforeItsFirstStepNamingIt) {
  TrainOptions o = tiny();
  o.stage = 1;
  o.offload.optimizer_dir = "/nonexistent/strata-offload";
  try {
    gpt::Trainer t(mp::world(), corpus(), o);
    ADD_FAILURE() << "trainer built";
  } catch (const strata::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/strata-offload"), std::string::npos)
        << e.what();
  }
}

}  // namespace
