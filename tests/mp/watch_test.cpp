// Watched operations (OpQueue::watch): what the device path's NCCL calls complete through, run
// here on the host with steps the test controls. Completion by polling, callbacks without a
// waiter, a step's failure, a peer's abort seen by the group's health, a Work outliving its group
// (also while the progress thread is polling it).
#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "mp.hpp"
#include "runtime/communicator_impl.hpp"

using namespace strata;
using namespace std::chrono_literals;

namespace {

Communicator::Impl& group(const Communicator& c) { return runtime::GroupAccess::of(c); }

// A step that completes the operation once `done` is set.
std::function<void(detail::WorkState&)> when(std::shared_ptr<std::atomic<bool>> done) {
  return [done](detail::WorkState& st) {
    if (done->load()) st.complete(nullptr, Clock::now());
  };
}

const Buffer kData{nullptr, 4, DataType::f32};

}  // namespace

TEST(Watch, CompletesWhenItsStepSaysDoneAndShowsInTheFlightRecorder) {
  auto& w = mp::world();
  auto& g = group(w);
  auto done = std::make_shared<std::atomic<bool>>(false);
  const ErrorContext where = g.next_call("all_reduce", -1);
  Work work = g.watch(where, kData, when(done));
  EXPECT_FALSE(work.test());
  std::thread later([done] {
    std::this_thread::sleep_for(20ms);
    done->store(true);
  });
  work.wait();
  later.join();
  EXPECT_TRUE(work.test());
  EXPECT_GT(work.elapsed_seconds(), 0.015);
  const std::string record = w.flight_record();
  EXPECT_NE(record.find("all_reduce"), std::string::npos) << record;
  EXPECT_NE(record.find("done"), std::string::npos) << record;
  w.barrier().wait();
}

TEST(Watch, CallbackFiresWithoutAWaiter) {
  auto& w = mp::world();
  auto done = std::make_shared<std::atomic<bool>>(false);
  Work work = group(w).watch(group(w).next_call("broadcast", 0), kData, when(done));
  std::promise<void> fired;
  work.on_complete([&fired] { fired.set_value(); });
  done->store(true);
  // Nobody waits or tests: the progress thread polls it (every 2 ms while it is outstanding).
  EXPECT_EQ(fired.get_future().wait_for(2s), std::future_status::ready);
  w.barrier().wait();
}

TEST(Watch, AStepThatThrowsFailsTheWorkAndRunsOnFailureOnce) {
  auto& w = mp::world();
  auto& g = group(w);
  const ErrorContext where = g.next_call("all_gather", -1);
  auto failures = std::make_shared<std::atomic<int>>(0);
  Work work = g.watch(
      where, kData,
      [where](detail::WorkState&) { throw Error(ErrorCode::transport, where, "the GPU said no"); },
      [failures] { failures->fetch_add(1); });
  for (int i = 0; i < 3; ++i) {
    mp::expect_error([&] { work.wait(); }, ErrorCode::transport,
                     {"all_gather failed", "the GPU said no"});
  }
  EXPECT_EQ(failures->load(), 1);
  EXPECT_NE(w.flight_record().find("FAILED"), std::string::npos) << w.flight_record();
  w.barrier().wait();
}

TEST(Watch, APeersAbortFailsAnOperationThatNeverCompletes) {
  auto& w = mp::world();
  if (w.size() < 2) GTEST_SKIP() << "needs a peer (world size 1)";
  Communicator sub = w.split(0, w.rank(), {.name = "watched"});
  if (w.rank() == 1) {
    sub.abort();
  } else if (w.rank() == 0) {
    auto never = std::make_shared<std::atomic<bool>>(false);
    Work work = group(sub).watch(group(sub).next_call("all_reduce", -1), kData, when(never));
    const auto t0 = Clock::now();
    try {
      work.wait();
      ADD_FAILURE() << "an operation that never completes completed";
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == ErrorCode::peer_failure || e.code() == ErrorCode::aborted)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    }
    EXPECT_LT(Clock::now() - t0, 10s) << "the abort was seen late";
  }
  w.barrier().wait();
}

TEST(Watch, AWorkThatOutlivesItsGroupFailsInsteadOfTouchingIt) {
  auto& w = mp::world();
  Work work;
  {
    Communicator sub = w.split(0, w.rank(), {.name = "gone"});
    auto never = std::make_shared<std::atomic<bool>>(false);
    work = group(sub).watch(group(sub).next_call("all_reduce", -1), kData, when(never));
    w.barrier().wait();  // every rank holds its Work before any group goes
  }
  mp::expect_error([&] { work.wait(); }, ErrorCode::aborted,
                   {"communicator destroyed with the operation still pending"});
  w.barrier().wait();
}

// The progress thread holds the op queue while it polls a watched operation: the group going
// meanwhile must stop that thread, not leave it the queue's last owner (it destroyed the queue
// on itself and aborted the process, under load in CI). A slow step keeps it polling.
TEST(Watch, AGroupGoesWhileItsProgressThreadPollsAWatchedOperation) {
  auto& w = mp::world();
  for (int round = 0; round < 10; ++round) {
    Work work;
    {
      Communicator sub = w.split(0, w.rank(), {.name = "polled"});
      work = group(sub).watch(group(sub).next_call("all_reduce", -1), kData,
                              [](detail::WorkState&) { std::this_thread::sleep_for(3ms); });
      std::this_thread::sleep_for(10ms);  // the thread is polling
    }
    mp::expect_error([&] { work.wait(); }, ErrorCode::aborted,
                     {"communicator destroyed with the operation still pending"});
  }
  w.barrier().wait();
}
