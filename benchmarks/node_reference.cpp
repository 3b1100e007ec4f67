#include "node_reference.hpp"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "kernels/copy_kernel.hpp"

namespace perf {
namespace {

using Clock = std::chrono::steady_clock;

bool pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  return pthread_setaffinity_np(pthread_self(), sizeof s, &s) == 0;
}

// The CPUs to measure the node on: this process's, unless a launcher bound it to fewer than two
// (mpirun --bind-to core), then the node's online CPUs, so that the header describes the node
// whatever rank 0's binding. Pinning to one outside a cpuset fails, and the measurement says so.
std::vector<int> node_cpus() {
  std::vector<int> cpus;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
    }
  }
  if (cpus.size() >= 2) return cpus;
  cpus.clear();
  for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN); ++c) cpus.push_back(int(c));
  return cpus;
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

// Payload bandwidth of `copy` on 64 MiB buffers, `threads` threads copying at once.
double copy_gbps(int threads, void (*copy)(void*, const void*, size_t)) {
  const size_t bytes = size_t(64) << 20;
  std::vector<std::vector<char>> src(threads, std::vector<char>(bytes, 1)),
      dst(threads, std::vector<char>(bytes, 0));
  const std::vector<int> cpus = node_cpus();
  auto run = [&](int t) {
    pin(cpus[size_t(t) % cpus.size()]);  // one thread per CPU, as far as there are CPUs
    for (int i = 0; i < 5; ++i) copy(dst[t].data(), src[t].data(), bytes);
  };
  auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) ts.emplace_back(run, t);
  for (auto& t : ts) t.join();
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  return 5.0 * threads * double(bytes) / s / 1e9;
}

}  // namespace

double memcpy_gbps(int threads) {
  return copy_gbps(threads, [](void* d, const void* s, size_t n) { std::memcpy(d, s, n); });
}

double streaming_copy_gbps(int threads) {
  return copy_gbps(threads, strata::kernels::copy_streaming);
}

std::optional<RoundTrip> core_round_trip() {
  const std::vector<int> cpus = node_cpus();
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
