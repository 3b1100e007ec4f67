// Optimizer-state offload on every world size: moments in a file train bit for bit as in memory
// at every stage and window, the resident window is what MemoryReport says, state moves in and
// out, and a bad directory or a full disk is an error naming the path before any step.
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
    // 192 bytes: chunks of 8 elements, cutting through units; 1000: 41; 1 MiB: one chunk.
    for (size_t window : {size_t(192), size_t(1000), size_t(1) << 20}) {
      SCOPED_TRACE(testing::Message() << "stage " << stage << " window " << window);
      ZeroEngine e(w, m.specs(), options(stage, window));
      shtest::init_engine(m, e);
      train(m, e, 0, 5);
      const strata::EngineState got = e.state();
      EXPECT_EQ(got.params, want.params);
      EXPECT_EQ(got.m, want.m);
      EXPECT_EQ(got.v, want.v);
      const size_t chunk = std::min(window / 24, owned), chunks = (owned + chunk - 1) / chunk;
      const auto r = e.memory();
      EXPECT_EQ(r.optimizer_bytes, std::min<size_t>(3, chunks) * 8 * chunk);
      EXPECT_LE(r.optimizer_bytes, window);
      EXPECT_EQ(r.offloaded_bytes, 8 * owned);
      if (window == 192) {
        EXPECT_GT(chunks, 3u);  // the ring of slots turns over
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
    ZeroEngine b(w, m.specs(), options(stage, 192));
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

TEST(Offload, AMissingDirectoryAFileOrATinyWindowIsRefusedNamingIt) {
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
