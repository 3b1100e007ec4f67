// Offload on every world size: moments (and at stage 3 the parameter shard) in a file train bit
// for bit as in memory at every stage and window, the resident window is what MemoryReport says,
// state moves in and out, and a bad directory, a full disk or a bad combination is an error
// naming it before any step.
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>

#include "model.hpp"
#include "tests/mp/mp.hpp"

namespace {
using strata::ZeroEngine;
using strata::ZeroOptions;

std::string scratch() { return std::filesystem::temp_directory_path().string(); }

ZeroOptions options(int stage, size_t window = 0) {
  ZeroOptions o = shtest::engine_options(stage);
  o.adamw.weight_decay = 0.1f;
  o.adamw.max_grad_norm = 0.05f;  // below the model's gradient norm: clipping acts
  if (window) o.offload = {scratch(), window};
  return o;
}

void train(const shtest::Mlp& m, ZeroEngine& e, int first, int steps) {
  auto& w = mp::world();
  for (int s = first; s < first + steps; ++s) shtest::train_step(m, e, s, w.rank(), w.size());
}

TEST(Offload, EveryStageAndWindowTrainsBitForBitAsInMemory) {
  auto& w = mp::world();
  shtest::Mlp m;
  for (int stage = 0; stage <= 3; ++stage) {
    ZeroEngine mem(w, m.specs(), options(stage));
    shtest::init_engine(m, mem);
    train(m, mem, 0, 5);
    const strata::EngineState want = mem.state();
    const size_t owned = mem.memory().optimizer_bytes / 8;  // elements of m (and of v)
    for (bool params : {false, true}) {
      if (params && stage != 3) continue;
      const size_t arrays = params ? 3 : 2, per_element = 3 * arrays * sizeof(float);
      // The smallest window: chunks of 8 elements, cutting through units; 1 MiB: one chunk.
      for (size_t window : {8 * per_element, size_t(1000), size_t(1) << 20}) {
        SCOPED_TRACE(testing::Message()
                     << "stage " << stage << " window " << window << " params " << params);
        ZeroOptions o = options(stage, window);
        o.offload.params = params;
        ZeroEngine e(w, m.specs(), o);
        shtest::init_engine(m, e);
        train(m, e, 0, 5);
        const strata::EngineState got = e.state();
        EXPECT_EQ(got.params, want.params);
        EXPECT_EQ(got.m, want.m);
        EXPECT_EQ(got.v, want.v);
        const size_t chunk = std::min(window / per_element, owned);
        const size_t chunks = (owned + chunk - 1) / chunk;
        const auto r = e.memory();
        EXPECT_EQ(r.optimizer_bytes, std::min<size_t>(3, chunks) * arrays * 4 * chunk);
        EXPECT_LE(r.optimizer_bytes, window);
        EXPECT_EQ(r.offloaded_optimizer_bytes, 8 * owned);
        EXPECT_EQ(r.offloaded_param_bytes, params ? 4 * owned : 0);
        // Offloaded, the parameters held are the gathered units only.
        if (params) {
          EXPECT_EQ(r.param_bytes, mem.memory().param_bytes - 4 * owned);
        }
        if (window == 8 * per_element) {
          EXPECT_GT(chunks, 3u);  // the ring of slots turns over
        }
      }
    }
  }
}

TEST(Offload, StateMovesInAndOutAndTrainingContinuesTheSame) {
  auto& w = mp::world();
  shtest::Mlp m;
  for (int stage = 0; stage <= 3; ++stage) {
    ZeroEngine a(w, m.specs(), options(stage));
    shtest::init_engine(m, a);
    train(m, a, 0, 3);
    const strata::EngineState st = a.state();
    ZeroOptions o = options(stage, 288);
    o.offload.params = stage == 3;
    ZeroEngine b(w, m.specs(), o);
    shtest::set_state(m, b, st);
    const strata::EngineState back = b.state();
    EXPECT_EQ(back.params, st.params) << "stage " << stage;
    EXPECT_EQ(back.m, st.m) << "stage " << stage;
    EXPECT_EQ(back.v, st.v) << "stage " << stage;
    train(m, a, 3, 2);
    train(m, b, 3, 2);
    EXPECT_EQ(b.full_params(), a.full_params()) << "stage " << stage;
  }
}

TEST(Offload, SgdOffloadsTheParameterShardAloneAndTrainsBitForBitAsInMemory) {
  // SGD keeps no moments: the file holds the parameters only, and nothing else is resident.
  auto& w = mp::world();
  shtest::Mlp m;
  ZeroOptions in_memory = options(3);
  in_memory.rule = strata::UpdateRule::sgd;
  ZeroEngine mem(w, m.specs(), in_memory);
  shtest::init_engine(m, mem);
  train(m, mem, 0, 5);
  const size_t owned = mem.layout().shard_numel();
  const size_t per_element = 3 * sizeof(float);  // three chunks of p
  for (size_t window : {8 * per_element, size_t(1000), size_t(1) << 20}) {
    SCOPED_TRACE(testing::Message() << "window " << window);
    ZeroOptions o = options(3, window);
    o.rule = strata::UpdateRule::sgd;
    o.offload.params = true;
    ZeroEngine e(w, m.specs(), o);
    shtest::init_engine(m, e);
    train(m, e, 0, 5);
    EXPECT_EQ(e.full_params(), mem.full_params());
    const size_t chunk = std::min(window / per_element, owned);
    const auto r = e.memory();
    EXPECT_EQ(r.optimizer_bytes, std::min<size_t>(3, (owned + chunk - 1) / chunk) * 4 * chunk);
    EXPECT_EQ(r.offloaded_optimizer_bytes, 0u);
    EXPECT_EQ(r.offloaded_param_bytes, 4 * owned);
    const strata::EngineState st = e.state();
    EXPECT_EQ(st.m, std::vector<float>(st.params.size(), 0.0f));
    EXPECT_EQ(st.v, std::vector<float>(st.params.size(), 0.0f));
  }
}

// Expects ZeroEngine's constructor to fail with `code`, naming every one of `words`.
void expect_refused(const ZeroOptions& o, strata::ErrorCode code,
                    std::initializer_list<std::string> words) {
  shtest::Mlp m;
  try {
    ZeroEngine e(mp::world(), m.specs(), o);
    ADD_FAILURE() << "engine built with offload to " << o.offload.optimizer_dir;
  } catch (const strata::Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const std::string& word : words)
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << word << ": " << e.what();
  }
}

TEST(Offload, AMissingDirectoryAFileATinyWindowOrABadCombinationIsRefused) {
  const auto inv = strata::ErrorCode::invalid_argument;
  ZeroOptions o = options(1, 192);
  o.offload.optimizer_dir = "/nonexistent/strata-offload";
  expect_refused(o, inv, {"/nonexistent/strata-offload", "rank"});
  const std::string file = scratch() + "/strata-offload-not-a-dir-" + std::to_string(getpid());
  std::ofstream(file) << "x";
  o.offload.optimizer_dir = file;
  expect_refused(o, inv, {file});
  std::filesystem::remove(file);
  expect_refused(options(1, 191), inv, {"191 bytes", "at least 192"});
  o = options(3, 287);
  o.offload.params = true;
  expect_refused(o, inv, {"287 bytes", "at least 288", "parameters"});
  o = options(2, 1 << 20);
  o.offload.params = true;
  expect_refused(o, inv, {"offload.params needs stage 3"});
  o = options(3, 1 << 20);  // SGD has no moments to offload
  o.rule = strata::UpdateRule::sgd;
  expect_refused(o, inv, {"UpdateRule::sgd", "offload.params"});
  o.offload.params = true;
  o.offload.window_bytes = 95;
  expect_refused(o, inv, {"95 bytes", "at least 96", "the parameters"});
}

TEST(Offload, NoRoomForTheFileIsRefusedNamingItAndTheBytes) {
  // A file-size limit stands in for a full disk: the allocation fails the same way, up front.
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit tiny = old;
  tiny.rlim_cur = 64;
  auto* previous = signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &tiny), 0);
  expect_refused(options(0, 192), strata::ErrorCode::invalid_argument,
                 {scratch() + "/strata-offload-r", "cannot allocate", "bytes"});
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, previous);
}

}  // namespace
