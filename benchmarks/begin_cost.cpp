// strata-begin-cost: what the network path pays per collective before any message moves
// (Worker::begin and began, once begin_collective: the call's record and the probes for untaken
// messages of the last two calls, docs/architecture.md "Mismatches") beside one idle
// ucp_worker_progress, on a one-rank UCX worker. Prints the mean of 2,000,000 calls, five times.
#include <chrono>
#include <cstdio>
#include <map>

#include "transport/ucx/worker.hpp"

using namespace strata;

namespace {

// The worker publishes and reads its own address: a map serves.
struct MapStore final : Store {
  std::map<std::string, Bytes> kv;
  void set(const std::string& k, const Bytes& v) override { kv[k] = v; }
  Bytes get(const std::string& k, std::chrono::milliseconds) override { return kv.at(k); }
  int64_t add(const std::string&, int64_t d) override { return d; }
  void wait(const std::vector<std::string>&, std::chrono::milliseconds) override {}
};

}  // namespace

int main() {
  MapStore store;
  ucx::Worker w(store, 0, 1, {false}, true, ErrorContext{}, std::chrono::seconds(10));
  const transport::Call call{transport::call_bits("all_reduce", DataType::f32, 0), -1, 2};
  const ErrorContext where{0, "world", "all_reduce", 0, -1};
  const auto deadline = Clock::now() + std::chrono::hours(1);
  constexpr int kCalls = 2000000;
  uint64_t seq = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    for (int i = 0; i < kCalls; ++i) {
      w.begin(seq++, where, deadline);
      w.began(call, true);
    }
    const auto t1 = Clock::now();
    for (int i = 0; i < kCalls; ++i) w.progress();
    const auto t2 = Clock::now();
    auto ns = [](auto d) { return std::chrono::duration<double, std::nano>(d).count() / kCalls; };
    std::printf("begin_collective %.1f ns   progress %.1f ns\n", ns(t1 - t0), ns(t2 - t1));
  }
}
