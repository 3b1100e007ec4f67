// kill -9 during a save: two forked ranks save a checkpoint, train on and start another save in
// which rank 1 stops after writing its shard; both are killed. The last complete checkpoint must
// load (here resharded onto one rank) and training must reach the uninterrupted parameters.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "model.hpp"
#include "sharding/checkpoint.hpp"
#include "strata/strata.hpp"

namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string g_dir;  // the test's directory, for the hook (no captures in a function pointer)

bool wait_for_file(const std::string& path, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!fs::exists(path)) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// The exit status of child `pid`, or -1 after killing it when it has not ended within `limit`.
int wait_or_kill(pid_t pid, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > end) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      return -1;
    }
    std::this_thread::sleep_for(10ms);
  }
  return status;
}

strata::TcpStoreOptions store_options(uint16_t port) {
  strata::TcpStoreOptions o;
  o.port = port;
  o.token = "crash-test";
  return o;
}

// A job of `size` ranks in forked processes meeting through a store rank 0 serves; rank 0
// publishes the port in a file.
strata::Communicator join(int rank, int size, std::unique_ptr<strata::TcpStoreServer>& server,
                          const std::string& tag) {
  const std::string port_file = g_dir + "/port-" + tag;
  uint16_t port = 0;
  if (rank == 0) {
    server = std::make_unique<strata::TcpStoreServer>(store_options(0));
    port = server->port();
    std::ofstream(port_file + ".tmp") << port;
    fs::rename(port_file + ".tmp", port_file);
  } else {
    if (!wait_for_file(port_file, 30s)) _exit(3);
    std::ifstream(port_file) >> port;
  }
  auto store = std::make_shared<strata::TcpStore>(store_options(port));
  strata::CommOptions co;
  co.timeout = std::chrono::milliseconds(30000);
  return strata::Communicator::create(store, rank, size, co);
}

void pause_rank1_after_its_shard(const char* point, int rank) {
  if (rank != 1 || std::string(point) != "shard_written") return;
  std::ofstream(g_dir + "/paused") << "1";
  for (;;) pause();  // the parent kills us here
}

// Rank `rank` of two: checkpoint after 3 steps, one more step, then the save that dies.
[[noreturn]] void saving_rank(int rank) {
  try {
    std::unique_ptr<strata::TcpStoreServer> server;
    strata::Communicator c = join(rank, 2, server, "save");
    shtest::Mlp m;
    strata::ZeroEngine e(c, m.specs(), shtest::engine_options(3));
    shtest::init_engine(m, e);
    for (int s = 0; s < 3; ++s) shtest::train_step(m, e, s, rank, 2);
    e.save(g_dir + "/ckpt");
    shtest::train_step(m, e, 3, rank, 2);
    strata::sharding::testing::set_save_hook(pause_rank1_after_its_shard);
    e.save(g_dir + "/ckpt");
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "saving rank %d: %s\n", rank, ex.what());
  }
  _exit(2);  // never reached when killed in time
}

// One rank: load the last complete checkpoint, train two more steps, write the parameters.
[[noreturn]] void resuming_rank() {
  int rc = 1;
  try {
    std::unique_ptr<strata::TcpStoreServer> server;
    strata::Communicator c = join(0, 1, server, "resume");
    shtest::Mlp m;
    strata::ZeroEngine e(c, m.specs(), shtest::engine_options(1));
    e.load(g_dir + "/ckpt");
    if (e.steps_done() == 3) {
      for (int s = 3; s < 5; ++s) shtest::train_step(m, e, s, 0, 1);
      auto p = e.full_params();
      std::ofstream(g_dir + "/result.bin", std::ios::binary)
          .write(reinterpret_cast<const char*>(p.data()), std::streamsize(p.size() * 4));
      rc = 0;
    }
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "resuming rank: %s\n", ex.what());
  }
  _exit(rc);
}

TEST(CheckpointCrash, KillDuringSaveLeavesTheLastCompleteCheckpointLoadable) {
  std::string tmpl = (fs::temp_directory_path() / "strata-crash-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  g_dir = tmpl;

  pid_t ranks[2];
  for (int r = 0; r < 2; ++r) {
    ranks[r] = fork();
    ASSERT_GE(ranks[r], 0);
    if (ranks[r] == 0) saving_rank(r);
  }
  const bool paused = wait_for_file(g_dir + "/paused", 60s);
  for (pid_t p : ranks) kill(p, SIGKILL);
  for (pid_t p : ranks) waitpid(p, nullptr, 0);  // SIGKILL ends them
  ASSERT_TRUE(paused) << "rank 1 never reached the middle of the second save";

  // The torn save: its directory holds rank 1's shard but no manifest; LATEST names step 3.
  std::string latest;
  std::ifstream(g_dir + "/ckpt/LATEST") >> latest;
  EXPECT_EQ(latest.rfind("step-00000003-", 0), 0u) << latest;
  size_t torn = 0;
  for (auto& d : fs::directory_iterator(g_dir + "/ckpt")) {
    const std::string name = d.path().filename().string();
    if (name.rfind("step-00000004-", 0) != 0) continue;
    ++torn;
    EXPECT_TRUE(fs::exists(d.path() / "shard-1-of-2.bin"));
    EXPECT_FALSE(fs::exists(d.path() / "manifest.txt"));
  }
  EXPECT_EQ(torn, 1u);

  pid_t resume = fork();
  ASSERT_GE(resume, 0);
  if (resume == 0) resuming_rank();
  const int status = wait_or_kill(resume, 60s);
  ASSERT_NE(status, -1) << "the resuming rank did not end within 60 s";
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "resuming rank failed";

  shtest::Mlp m;
  const auto want = shtest::concat(shtest::reference(m, shtest::engine_options(0).adamw, 5));
  std::vector<float> got(want.size());
  std::ifstream(g_dir + "/result.bin", std::ios::binary)
      .read(reinterpret_cast<char*>(got.data()), std::streamsize(got.size() * 4));
  EXPECT_EQ(shtest::compare(got, want), "");
  fs::remove_all(g_dir);
}
}  // namespace
