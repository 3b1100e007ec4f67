// node_layout's view of the cores: ranks take turns on a core only when the union of their
// affinity masks has fewer CPUs than there are ranks (mpirun --bind-to core gives every rank one
// CPU, and two ranks bound to two cores must not be treated as oversubscribed). Two threads play
// the two ranks; each publishes its own thread's mask.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <thread>

#include "bootstrap/node_identity.hpp"
#include "strata/store.hpp"

namespace {

using namespace std::chrono_literals;
using strata::bootstrap::NodeLayoutInfo;

bool pin_to(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  return pthread_setaffinity_np(pthread_self(), sizeof s, &s) == 0;
}

// Both ranks' layouts, rank r's thread pinned to cpus[r] while it publishes.
std::vector<NodeLayoutInfo> layouts(const std::string& prefix, int cpu0, int cpu1) {
  strata::TcpStoreOptions so;
  so.token = "layout-test";
  strata::TcpStoreServer server(so);
  std::vector<NodeLayoutInfo> out(2);
  std::vector<std::thread> ranks;
  const int cpus[2] = {cpu0, cpu1};
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      if (!pin_to(cpus[r])) return;
      strata::TcpStoreOptions co;
      co.port = server.port();
      co.token = so.token;
      auto client = std::make_shared<strata::TcpStore>(co);
      strata::PrefixStore store(client, prefix);
      out[size_t(r)] = strata::bootstrap::node_layout(store, r, 2, {.rank = r, .op = "init"}, 10s);
    });
  }
  for (auto& t : ranks) t.join();
  return out;
}

TEST(NodeLayout, RanksOversubscribeOnlyWhenTheirMasksHaveFewerCpusThanRanks) {
  if (!pin_to(1)) {
    GTEST_SKIP() << "needs a machine whose CPUs 0 and 1 this test may pin threads to (pinning to "
                    "CPU 1 failed: one CPU, or a cpuset without it); it plays two ranks on them";
  }
  // One process: the layout keeps the most ranks and CPUs its groups saw, so the shared core
  // comes first. Two ranks on CPU 0 alone take turns.
  for (const auto& info : layouts("shared", 0, 0)) {
    EXPECT_EQ(info.ranks_on_my_kernel, 2);
    EXPECT_EQ(info.cpus_of_my_kernel, 1);
    EXPECT_TRUE(info.oversubscribed());
  }
  // Bound to CPUs 0 and 1, each sees a single CPU, yet they do not take turns.
  for (const auto& info : layouts("apart", 0, 1)) {
    EXPECT_EQ(info.ranks_on_my_kernel, 2);
    EXPECT_EQ(info.cpus_of_my_kernel, 2);
    EXPECT_FALSE(info.oversubscribed());
  }
}

}  // namespace
