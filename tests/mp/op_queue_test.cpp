// The progress engine: an idle rank, or one with only a receive pending, must not burn a core
// (on a 2-core node a spinning thread halves the trainer's compute).
#include <sys/resource.h>

#include <thread>

#include "mp.hpp"

using namespace strata;

namespace {
// What "no CPU" may cost in a second: the progress thread's waking to check its queues, which a
// sanitizer's instrumentation makes 2-3x slower (an ASan CI run measured 0.11 s for a pending
// receive); a spinning rank would use the whole second.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr double kIdleCpu = 0.3;
#else
constexpr double kIdleCpu = 0.1;
#endif

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}
}  // namespace

TEST(OpQueue, IdleRankUsesNoCpu) {
  auto& w = mp::world();
  std::vector<float> v(1024, 1.0f);
  w.all_reduce(buffer(v), ReduceOp::sum).wait();  // engine and transports warmed up
  const double before = cpu_seconds();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double used = cpu_seconds() - before;
  // CPU time is this process's own, so other load on the machine does not inflate it.
  EXPECT_LT(used, kIdleCpu) << "an idle rank used " << used << " s of CPU in 1 s";
  w.barrier().wait();
}

TEST(OpQueue, PendingReceiveUsesNoCpu) {
  auto& w = mp::world();
  if (w.size() < 2) GTEST_SKIP() << "needs a peer (world size 1)";
  std::vector<int32_t> v(16, 0);
  Work r;
  if (w.rank() == 0) r = w.recv(buffer(v), 1, 99);
  const double before = cpu_seconds();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double used = cpu_seconds() - before;
  EXPECT_LT(used, kIdleCpu) << "a rank with a pending receive used " << used << " s of CPU in 1 s";
  if (w.rank() == 1) {
    std::vector<int32_t> s(16, 7);
    w.send(buffer(s), 0, 99).wait();
  }
  if (w.rank() == 0) {
    r.wait();
    EXPECT_EQ(v, std::vector<int32_t>(16, 7));
  }
  w.barrier().wait();
}

// Work::on_complete: runs exactly once, after the result is in place, without anyone waiting
// (the torch backend completes its futures this way), and for a failed operation too. Every
// callback given runs, in order: a torch batch and its last send share one operation.
TEST(OpQueue, CompletionCallbackRunsOnceWithoutAWaiter) {
  auto& w = mp::world();
  std::vector<int64_t> v(100000, w.rank() + 1);
  std::atomic<int> calls{0}, second{0};
  std::vector<int64_t> seen;  // the whole result as the callback found it
  Work op = w.all_reduce(buffer(v), ReduceOp::sum);
  op.on_complete([&] {
    seen = v;
    calls.fetch_add(1);  // releases `seen` to the test thread
  });
  op.on_complete([&] { second.store(calls.load() == 1 ? 1 : -1); });  // -1: ran before the first
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (second.load() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  op.wait();
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(second.load(), 1);
  EXPECT_EQ(seen, std::vector<int64_t>(v.size(), int64_t(w.size()) * (w.size() + 1) / 2));
  // Registered after completion: runs at once, on this thread.
  int late = 0;
  op.on_complete([&] { ++late; });
  EXPECT_EQ(late, 1);
  int empty = 0;
  Work().on_complete([&] { ++empty; });
  EXPECT_EQ(empty, 1);
  // A failed operation (a receive nobody sends, past its 300 ms deadline) still calls back.
  Communicator c =
      w.split(0, w.rank(), {.name = "callback", .timeout = std::chrono::milliseconds(300)});
  if (w.size() >= 2 && w.rank() == 0) {
    std::atomic<int> failed{0};
    std::vector<int32_t> r(4);
    Work lost = c.recv(buffer(r), 1, 7);
    lost.on_complete([&] { failed.fetch_add(1); });
    EXPECT_THROW(lost.wait(), Error);
    EXPECT_EQ(failed.load(), 1);
  }
  w.barrier().wait();
}

// Work::test() never waits for a rank that has not issued the collective yet: rank 0 tests its
// all-reduces, then lets the others issue theirs (a send on another group). Were test() to start
// them there, it would wait for peers that wait for it, until the deadline. Both paths: a
// staged all-reduce (queued) and an 8-byte one (the immediate path hands the rest to the queue).
TEST(OpQueue, TestWaitsForNoRankThatHasNotIssued) {
  auto& w = mp::world();
  if (w.size() < 2) GTEST_SKIP() << "needs a peer (world size 1)";
  Communicator side = w.split(0, w.rank(), {.name = "go-ahead"});
  for (const size_t count : {size_t(2), size_t(1) << 20}) {
    std::vector<int32_t> v(count, w.rank() + 1);
    std::vector<int32_t> go(1, 1);
    Work op;
    if (w.rank() == 0) {
      op = w.all_reduce(buffer(v), ReduceOp::sum);
      for (int i = 0; i < 100; ++i) EXPECT_FALSE(op.test()) << "the peers have not issued it";
      for (int peer = 1; peer < w.size(); ++peer) side.send(buffer(go), peer, 1).wait();
    } else {
      side.recv(buffer(go), 0, 1).wait();
      op = w.all_reduce(buffer(v), ReduceOp::sum);
    }
    // Issued everywhere now: test() alone (or the progress thread) completes it.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!op.test() && std::chrono::steady_clock::now() < until) {
    }
    ASSERT_TRUE(op.test()) << count;
    EXPECT_EQ(v, std::vector<int32_t>(count, w.size() * (w.size() + 1) / 2)) << count;
  }
  w.barrier().wait();
}
