// Sharded checkpoints on every world size: save and reload across world sizes (resharding) and
// stages, continue training to the reference, and fail loudly on damaged or foreign checkpoints.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "model.hpp"
#include "tests/expect_error.hpp"
#include "tests/mp/mp.hpp"

namespace {
namespace fs = std::filesystem;
using strata::ZeroEngine;
using strata::ZeroOptions;

ZeroOptions options(int stage) {
  ZeroOptions o;
  o.stage = stage;
  o.buckets.cap_bytes = 260;
  o.buckets.first_cap_bytes = 100;
  o.adamw.lr = 1e-2f;
  o.adamw.weight_decay = 0.1f;
  return o;
}

// A fresh directory every rank agrees on (rank 0 creates it), removed at the end of the test.
struct SharedDir {
  std::string path;
  SharedDir() {
    auto& w = mp::world();
    std::vector<uint8_t> buf(256, 0);
    if (w.rank() == 0) {
      std::string tmpl = (fs::temp_directory_path() / "strata-ckpt-XXXXXX").string();
      if (!mkdtemp(tmpl.data())) std::abort();
      std::copy(tmpl.begin(), tmpl.end(), buf.begin());
    }
    w.broadcast(strata::buffer(buf), 0).wait();
    path = reinterpret_cast<const char*>(buf.data());
  }
  ~SharedDir() {
    mp::world().barrier().wait();
    if (mp::world().rank() == 0) fs::remove_all(path);
  }
};

// The first `size` ranks of the world as a communicator (empty elsewhere).
strata::Communicator first_ranks(int size) {
  auto& w = mp::world();
  return w.split(w.rank() < size ? 0 : -1, w.rank());
}

void train(const shtest::Mlp& m, ZeroEngine& e, strata::Communicator& c, int first, int steps) {
  for (int s = first; s < first + steps; ++s) shtest::train_step(m, e, s, c.rank(), c.size());
}

struct Reshard {
  int from_size, from_stage, to_size, to_stage;
  // Moments (and at stage 3 the parameter shard) in a file, through a small window.
  bool offload_from = false, offload_to = false;
};

ZeroOptions options(int stage, bool offload) {
  ZeroOptions o = options(stage);
  if (offload) o.offload = {fs::temp_directory_path().string(), 288, stage == 3};
  return o;
}

TEST(Checkpoint, ReloadsOnAnotherWorldSizeAndStageAndTrainsOnToTheReference) {
  auto& w = mp::world();
  shtest::Mlp m;
  const auto after3 = shtest::concat(shtest::reference(m, options(0).adamw, 3));
  const auto after5 = shtest::concat(shtest::reference(m, options(0).adamw, 5));
  const std::vector<Reshard> cases = {{4, 3, 2, 2},       {2, 2, 4, 3},
                                      {3, 1, 4, 0, true}, {2, 0, 1, 3, false, true},
                                      {1, 3, 2, 1, true}, {3, 3, 2, 3, true, true},
                                      {2, 3, 3, 2},       {1, 0, 1, 0, false, true}};
  for (const Reshard& c : cases) {
    if (c.from_size > w.size() || c.to_size > w.size()) continue;
    SCOPED_TRACE(testing::Message()
                 << c.from_size << " ranks stage " << c.from_stage << " -> " << c.to_size
                 << " ranks stage " << c.to_stage << " offload " << c.offload_from << c.offload_to);
    SharedDir dir;
    strata::Communicator a = first_ranks(c.from_size);
    if (a) {
      ZeroEngine e(a, m.specs(), options(c.from_stage, c.offload_from));
      shtest::init_engine(m, e);
      train(m, e, a, 0, 3);
      e.save(dir.path);
    }
    w.barrier().wait();
    strata::Communicator b = first_ranks(c.to_size);
    if (b) {
      ZeroEngine e(b, m.specs(), options(c.to_stage, c.offload_to));
      e.load(dir.path);
      EXPECT_EQ(e.steps_done(), 3);
      EXPECT_EQ(shtest::compare(e.full_params(), after3), "");
      train(m, e, b, 3, 2);  // the moments came through too, or this drifts
      const auto got = e.full_params();
      EXPECT_EQ(shtest::compare(got, after5), "");
      EXPECT_TRUE(mp::identical_on_all_ranks(b, got.data(), got.size() * sizeof(float)));
    }
  }
}

TEST(Checkpoint, LatestPointsAtTheLastCompleteSave) {
  auto& w = mp::world();
  shtest::Mlp m;
  SharedDir dir;
  ZeroEngine e(w, m.specs(), options(2));
  shtest::init_engine(m, e);
  train(m, e, w, 0, 1);
  e.save(dir.path);
  train(m, e, w, 1, 1);
  e.save(dir.path);
  ZeroEngine f(w, m.specs(), options(2));
  f.load(dir.path);
  EXPECT_EQ(f.steps_done(), 2);
  size_t checkpoints = 0;
  for (auto& entry : fs::directory_iterator(dir.path)) checkpoints += entry.is_directory();
  EXPECT_EQ(checkpoints, 2u);
}

using testing_errors::error_of;

TEST(Checkpoint, DamagedOrForeignCheckpointsAreErrorsNamingTheFile) {
  auto& w = mp::world();
  shtest::Mlp m;
  SharedDir dir;
  {
    ZeroEngine e(w, m.specs(), options(3));
    shtest::init_engine(m, e);
    e.save(dir.path);
  }
  std::string latest;
  std::ifstream(dir.path + "/LATEST") >> latest;
  const std::string ck = dir.path + "/" + latest;
  // Another model: named tensor mismatch.
  shtest::Mlp other;
  other.dims = {5, 8, 4, 6, 3};
  std::string msg = error_of([&] { ZeroEngine(w, other.specs(), options(3)).load(dir.path); });
  EXPECT_NE(msg.find("layer0.w"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank " + std::to_string(w.rank())), std::string::npos) << msg;
  w.barrier().wait();
  // A flipped byte in shard 0: every rank reading it reports the file.
  if (w.rank() == 0) {
    std::fstream f(ck + "/shard-0-of-" + std::to_string(w.size()) + ".bin",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x7f');
  }
  w.barrier().wait();
  ZeroEngine stage0(w, m.specs(), options(0));  // stage 0 reads every shard
  msg = error_of([&] { stage0.load(dir.path); });
  EXPECT_NE(msg.find("checksum mismatch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("shard-0-of-"), std::string::npos) << msg;
  w.barrier().wait();
  if (w.rank() == 0) fs::remove(ck + "/manifest.txt");
  w.barrier().wait();
  msg = error_of([&] { stage0.load(dir.path); });
  EXPECT_NE(msg.find("manifest missing"), std::string::npos) << msg;
  msg = error_of([&] { stage0.load(dir.path + "/nowhere"); });
  EXPECT_NE(msg.find("LATEST"), std::string::npos) << msg;
}
}  // namespace
