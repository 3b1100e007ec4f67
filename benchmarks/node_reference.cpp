#include "node_reference.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace perf {
namespace {

using Clock = std::chrono::steady_clock;

bool pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  return pthread_setaffinity_np(pthread_self(), sizeof s, &s) == 0;
}

// One batch of `n` round trips between the calling thread and a helper pinned to `echo_cpu`;
// ns per round trip. Each flag has a cache line of its own.
double bounce(int echo_cpu, long n) {
  struct alignas(128) Flag {
    std::atomic<long> v{0};
  };
  Flag ping, pong;
  std::thread echo([&] {
    pin(echo_cpu);
    for (long i = 1; i <= n; ++i) {
      while (ping.v.load(std::memory_order_acquire) != i) {
      }
      pong.v.store(i, std::memory_order_release);
    }
  });
  auto t0 = Clock::now();
  for (long i = 1; i <= n; ++i) {
    ping.v.store(i, std::memory_order_release);
    while (pong.v.load(std::memory_order_acquire) != i) {
    }
  }
  double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / double(n);
  echo.join();
  return ns;
}

}  // namespace

double memcpy_gbps(int threads) {
  const size_t bytes = size_t(64) << 20;
  std::vector<std::vector<char>> src(threads, std::vector<char>(bytes, 1)),
      dst(threads, std::vector<char>(bytes, 0));
  auto run = [&](int t) {
    for (int i = 0; i < 5; ++i) std::memcpy(dst[t].data(), src[t].data(), bytes);
  };
  auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) ts.emplace_back(run, t);
  for (auto& t : ts) t.join();
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  return 5.0 * threads * double(bytes) / s / 1e9;
}

std::optional<RoundTrip> core_round_trip() {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return std::nullopt;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  if (cpus.size() < 2) return std::nullopt;
  // Measure on a helper thread so that the caller's affinity is left as it was.
  std::vector<double> batches;
  std::thread probe([&] {
    if (!pin(cpus[0])) return;
    for (int i = 0; i < 5; ++i) batches.push_back(bounce(cpus[1], 50000));
  });
  probe.join();
  if (batches.empty()) return std::nullopt;
  std::sort(batches.begin(), batches.end());
  return RoundTrip{batches[batches.size() / 2],
                   "cpu " + std::to_string(cpus[0]) + " <-> cpu " + std::to_string(cpus[1])};
}

}  // namespace perf
