// strata-placement-probe: where the host has put this node's first two CPUs relative to each
// other, and what that does to moving data between them the way the shared-memory collectives do.
// Prints the cache-line round trip (node_reference.hpp), then the payload bandwidth of 64 MiB
// passed from a producer on the first CPU to a consumer on the second through four 256 KiB
// staging buffers, with the staging and the consumer's output written by ordinary or streaming
// stores. Run it a few times: on a VM the figures change when the host moves the vCPUs.
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "node_reference.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kTotal = size_t(64) << 20, kChunk = 256 << 10;
constexpr int kDepth = 4;

void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

// 64-byte aligned, n a multiple of 128.
__attribute__((target("avx2"))) void copy(char* d, const char* s, size_t n, bool streaming) {
  for (size_t i = 0; i < n; i += 32) {
    const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(s + i));
    if (streaming)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), v);
    else
      _mm256_store_si256(reinterpret_cast<__m256i*>(d + i), v);
  }
  if (streaming) _mm_sfence();
}

// Best of three passes, GB/s of payload.
double staged_copy_gbps(int from, int to, bool stream_stage, bool stream_out) {
  std::vector<char*> mem;
  for (size_t bytes : {kTotal, kTotal, kChunk * kDepth}) {
    mem.push_back(static_cast<char*>(std::aligned_alloc(64, bytes)));
    for (size_t i = 0; i < bytes; i += 4096) mem.back()[i] = 1;  // fault the pages in
  }
  char *src = mem[0], *dst = mem[1], *stage = mem[2];
  const long chunks = long(kTotal / kChunk);
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    std::atomic<long> written{0}, consumed{0};
    std::thread consumer([&] {
      pin(to);
      for (long i = 0; i < chunks; ++i) {
        while (written.load(std::memory_order_acquire) <= i) {
        }
        copy(dst + i * kChunk, stage + (i % kDepth) * kChunk, kChunk, stream_out);
        consumed.store(i + 1, std::memory_order_release);
      }
    });
    Clock::time_point t0;
    std::thread producer([&] {  // a thread of its own: the caller's affinity stays as it was
      pin(from);
      t0 = Clock::now();
      for (long i = 0; i < chunks; ++i) {
        while (consumed.load(std::memory_order_acquire) + kDepth <= i) {
        }
        copy(stage + (i % kDepth) * kChunk, src + i * kChunk, kChunk, stream_stage);
        written.store(i + 1, std::memory_order_release);
      }
    });
    producer.join();
    consumer.join();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, double(kTotal) / s / 1e9);
  }
  for (char* p : mem) std::free(p);
  return best;
}

}  // namespace

int main() {
  if (!__builtin_cpu_supports("avx2")) {
    std::fprintf(stderr, "strata-placement-probe: needs AVX2\n");
    return 2;
  }
  cpu_set_t allowed;
  sched_getaffinity(0, sizeof allowed, &allowed);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  const auto rt = perf::core_round_trip();
  if (!rt || cpus.size() < 2) {
    std::fprintf(stderr, "strata-placement-probe: needs two CPUs\n");
    return 2;
  }
  std::printf("core-to-core round trip: %.0f ns (%s)\n", rt->ns, rt->cpus.c_str());
  std::printf("staged copy cpu %d -> cpu %d, GB/s (staging / output stores):\n", cpus[0], cpus[1]);
  for (bool stage : {false, true}) {
    for (bool out : {false, true}) {
      std::printf("  %-9s / %-9s %6.2f\n", stage ? "streaming" : "ordinary",
                  out ? "streaming" : "ordinary", staged_copy_gbps(cpus[0], cpus[1], stage, out));
    }
  }
  if (const auto end = perf::core_round_trip())
    std::printf("core-to-core round trip at end: %.0f ns\n", end->ns);
}
