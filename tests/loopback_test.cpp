// A transport in a dozen lines of state: n ranks as threads of one process, messages copied
// through a shared mailbox. It implements the data plane only (transport::DataPlane, no call
// comparison, no failure channel, no progress), which is all the algorithms need: each runs
// here on 2-5 ranks and its results are compared element by element with a sum computed apart.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>
#include <tuple>
#include <vector>

#include "algorithms/algorithms.hpp"
#include "transport/transport.hpp"

using namespace strata;
using transport::Request;

namespace {

// Messages in flight: (source, destination, sequence number, step) -> payloads in send order.
struct Mailbox {
  std::mutex mu;
  std::condition_variable arrived;
  std::map<std::tuple<int, int, uint64_t, uint32_t>, std::vector<std::vector<uint8_t>>> queues;
};

class Loopback final : public transport::DataPlane {
 public:
  Loopback(Mailbox& box, int rank, int size) : box_(box), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void begin(uint64_t seq, const ErrorContext& where, Clock::time_point deadline) override {
    seq_ = seq, where_ = where, deadline_ = deadline;
  }
  Request isend(int peer, const void* data, size_t bytes, uint32_t step) override {
    std::lock_guard<std::mutex> l(box_.mu);  // eager: copied out at once
    const auto* p = static_cast<const uint8_t*>(data);
    box_.queues[{rank_, peer, seq_, step}].emplace_back(p, p + bytes);
    box_.arrived.notify_all();
    return {nullptr, peer, bytes, false};
  }
  Request irecv(int peer, void* data, size_t bytes, uint32_t step) override {
    pending_.push_back({data, step});
    return {&pending_.back(), peer, bytes, true};
  }
  void wait(std::span<Request> requests) override {
    std::unique_lock<std::mutex> l(box_.mu);
    for (Request& r : requests) {
      if (!r.is_recv) continue;
      const auto* want = static_cast<const Pending*>(r.handle);
      auto& q = box_.queues[{r.peer, rank_, seq_, want->step}];
      if (!box_.arrived.wait_until(l, deadline_, [&] { return !q.empty(); })) {
        throw Error(ErrorCode::timeout, where_, "loopback: nothing from " + std::to_string(r.peer));
      }
      if (q.front().size() != r.bytes) throw Error(ErrorCode::internal, where_, "size differs");
      std::memcpy(want->data, q.front().data(), r.bytes);
      q.erase(q.begin());
    }
    pending_.clear();
  }
  // User messages are not what this test is about: refused by name.
  Request post_send(int, const void*, size_t, uint32_t) override { throw unsupported(); }
  Request post_recv(int, void*, size_t, uint32_t) override { throw unsupported(); }
  bool test(Request&, const ErrorContext&) override { throw unsupported(); }
  void cancel(Request&) override {}

 private:
  struct Pending {
    void* data;
    uint32_t step;
  };
  Error unsupported() const { return Error(ErrorCode::invalid_argument, where_, "loopback: no"); }
  Mailbox& box_;
  const int rank_, size_;
  uint64_t seq_ = 0;
  ErrorContext where_;
  Clock::time_point deadline_;
  std::deque<Pending> pending_;  // stable addresses for the requests' handles
};

// Runs `body(p2p)` on `n` ranks at once, each in its own collective (sequence number 1).
template <typename Body>
void on_ranks(int n, Body body) {
  Mailbox box;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Loopback p(box, r, n);
      p.begin(1, {.rank = r, .group = "loopback"}, Clock::now() + std::chrono::seconds(20));
      body(p);
    });
  }
  for (auto& t : threads) t.join();
}

float input(int rank, size_t i) { return float(rank * 1000 + int(i % 997)) * 0.5f; }

}  // namespace

TEST(Loopback, EveryAllReduceSumsWhatEachRankGave) {
  using F = void (*)(algo::P2P&, const void*, void*, size_t, DataType, ReduceOp);
  const std::pair<const char*, F> algos[] = {
      {"ring", algo::ring_all_reduce},
      {"recursive_doubling", algo::recursive_doubling_all_reduce},
      {"halving_doubling", algo::halving_doubling_all_reduce}};
  for (const auto& [name, run] : algos) {
    for (int n : {2, 3, 4, 5}) {
      const size_t count = 1000 + size_t(n);  // not a multiple of n
      std::vector<std::vector<float>> out(static_cast<size_t>(n), std::vector<float>(count));
      on_ranks(n, [&](transport::DataPlane& p) {
        std::vector<float> in(count);
        for (size_t i = 0; i < count; ++i) in[i] = input(p.rank(), i);
        run(p, in.data(), out[size_t(p.rank())].data(), count, DataType::f32, ReduceOp::sum);
      });
      for (int r = 0; r < n; ++r) {
        for (size_t i = 0; i < count; ++i) {
          float want = 0;
          for (int q = 0; q < n; ++q) want += input(q, i);  // exact: small halves
          ASSERT_EQ(out[size_t(r)][i], want) << name << " n " << n << " rank " << r << " i " << i;
        }
      }
    }
  }
}

TEST(Loopback, RootedAndPairwiseMovementsPutEveryBlockInPlace) {
  for (int n : {2, 3, 5}) {
    const size_t block = 37;
    const auto ranks = static_cast<size_t>(n);
    std::vector<std::vector<float>> gathered(ranks), exchanged(ranks),
        broadcast(ranks, std::vector<float>(block));
    on_ranks(n, [&](transport::DataPlane& p) {
      const int r = p.rank();
      std::vector<float> mine(block), all(block * ranks);
      for (size_t i = 0; i < block; ++i) mine[i] = input(r, i);
      algo::linear_gather(p, mine.data(), all.data(), block * sizeof(float), 1);
      if (r == 1) gathered[1] = all;
      p.begin(2, {}, Clock::now() + std::chrono::seconds(20));
      std::vector<float> send(block * ranks), recv(block * ranks);
      for (size_t i = 0; i < send.size(); ++i) send[i] = input(r, i);
      std::vector<size_t> counts(ranks, block), displs(ranks);
      for (int q = 0; q < n; ++q) displs[size_t(q)] = block * size_t(q);
      algo::pairwise_all_to_allv(p, send.data(), counts.data(), displs.data(), recv.data(),
                                 counts.data(), displs.data(), sizeof(float));
      exchanged[size_t(r)] = recv;
      p.begin(3, {}, Clock::now() + std::chrono::seconds(20));
      std::vector<float>& b = broadcast[size_t(r)];
      b.assign(block, -1.0f);  // the root's output apart from its input: it copies as it sends
      algo::binomial_broadcast(p, r == n - 1 ? mine.data() : b.data(), b.data(),
                               block * sizeof(float), n - 1);
      p.begin(4, {}, Clock::now() + std::chrono::seconds(20));
      algo::dissemination_barrier(p);
    });
    for (int q = 0; q < n; ++q) {
      for (size_t i = 0; i < block; ++i) {
        ASSERT_EQ(gathered[1][size_t(q) * block + i], input(q, i)) << "gather n " << n;
        ASSERT_EQ(broadcast[size_t(q)][i], input(n - 1, i)) << "broadcast n " << n;
        for (int s = 0; s < n; ++s) {  // rank q's block from s: s's send block q
          ASSERT_EQ(exchanged[size_t(q)][size_t(s) * block + i], input(s, size_t(q) * block + i))
              << "all_to_allv n " << n;
        }
      }
    }
  }
}
