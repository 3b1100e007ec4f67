// Offload in the trainer under mpirun (gpt_parallel_np2/3/4): every ZeRO stage trains bit for
// bit as with the moments (and at stage 3 the parameter shard) in memory, with a window far
// smaller than the state; a directory that cannot hold the file stops the trainer before its
// first step, naming it.
#include <filesystem>

#include "tests/trainer/layout_runs.hpp"

namespace {

using namespace layout_runs;

TEST(Offload, EveryStageTrainsBitForBitAsWithTheStateInMemory) {
  for (int stage = 0; stage <= 4; ++stage) {  // 4: stage 3 with the parameter shard offloaded
    TrainOptions o = tiny();
    o.stage = std::min(stage, 3);
    const Trained mem = train(mp::world(), o, 4);
    o.offload = {std::filesystem::temp_directory_path().string(), 16 << 10, stage == 4};
    gpt::Trainer t(mp::world(), corpus(), o);
    const strata::MemoryReport r = t.engine().memory();
    EXPECT_LE(r.optimizer_bytes, size_t(16) << 10);
    EXPECT_GT(r.offloaded_optimizer_bytes, 4 * r.optimizer_bytes) << "the window holds a fraction";
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
