// Communicator::abort(): pending and running operations end at once with ErrorCode::aborted, the
// other ranks' operations on the group fail naming the aborting rank long before their deadline
// (STRATA_TIMEOUT is 120 s in these tests), and every later call fails. Each test aborts a group
// split off the world for it, so the world stays usable.
#include <chrono>
#include <thread>

#include "mp.hpp"

using namespace strata;
using namespace std::chrono_literals;

namespace {

using Clock = std::chrono::steady_clock;

// Waits for `w`, expecting an error of `code` that names `culprit` as the peer; returns seconds.
double expect_failure(const Work& w, ErrorCode code, int culprit) {
  const auto start = Clock::now();
  try {
    w.wait();
    ADD_FAILURE() << "the operation completed";
  } catch (const Error& e) {
    EXPECT_EQ(int(e.code()), int(code)) << e.what();
    EXPECT_EQ(e.where().peer, culprit) << e.what();
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

// The last rank aborts instead of joining an all-reduce: everyone else's fails naming it.
TEST(Abort, PeersFailNamingTheAbortingRank) {
  auto& world = mp::world();
  if (world.size() < 2) {
    GTEST_SKIP() << "needs 2 or more ranks: one aborts while the others wait on it";
  }
  auto group = world.split(0, world.rank());
  const int last = group.size() - 1;
  std::vector<float> data(1 << 16, 1.0f);
  if (group.rank() == last) {
    std::vector<float> in(4);
    Work pending = group.recv(buffer(in), 0, 77);  // never sent: abort must end it
    std::this_thread::sleep_for(100ms);
    group.abort();
    expect_failure(pending, ErrorCode::aborted, last);
    // The flight record shows the receive the abort ended.
    const std::string record = group.flight_record();
    EXPECT_NE(record.find("recv"), std::string::npos) << record;
    EXPECT_NE(record.find("FAILED"), std::string::npos) << record;
    EXPECT_NE(record.find("aborted"), std::string::npos) << record;
    // Later calls fail at once, collectives and point-to-point alike.
    EXPECT_LT(
        expect_failure(group.all_reduce(buffer(data), ReduceOp::sum), ErrorCode::aborted, last),
        1.0);
    EXPECT_LT(expect_failure(group.send(buffer(in), 0, 1), ErrorCode::aborted, last), 1.0);
  } else {
    const double s =
        expect_failure(group.all_reduce(buffer(data), ReduceOp::sum), ErrorCode::aborted, last);
    EXPECT_LT(s, 10.0) << "the abort was not noticed before the deadline";
  }
  world.barrier().wait();
}

// A rank that aborts after a failure tells the others what it was: the last rank's all-reduce
// times out (the others join it late), it aborts, and the others' all-reduce, or their next call
// (the input it left may complete theirs), names it and the timeout.
TEST(Abort, PeersLearnWhatMadeARankAbort) {
  auto& world = mp::world();
  if (world.size() < 2) GTEST_SKIP() << "needs 2 or more ranks: one aborts, the others learn why";
  CommOptions o;
  o.name = "why";
  o.timeout = 300ms;
  auto group = world.split(0, world.rank(), o);
  const int last = group.size() - 1;
  std::vector<float> data(4, 1.0f);
  if (group.rank() == last) {
    try {
      group.all_reduce(buffer(data), ReduceOp::sum).wait();
      ADD_FAILURE() << "the all-reduce completed alone";
    } catch (const Error& e) {
      EXPECT_EQ(int(e.code()), int(ErrorCode::timeout)) << e.what();
    }
    group.abort();
  } else {
    std::this_thread::sleep_for(1s);  // the last rank has timed out and aborted by now
    try {
      group.all_reduce(buffer(data), ReduceOp::sum).wait();
      group.barrier().wait();
      ADD_FAILURE() << "the all-reduce and the barrier completed";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(int(e.code()), int(ErrorCode::aborted)) << m;
      EXPECT_EQ(e.where().peer, last) << m;
      EXPECT_NE(m.find("rank " + std::to_string(last) +
                       " aborted the communicator after: "
                       "all_reduce failed on rank " +
                       std::to_string(last) + " of group why"),
                std::string::npos)
          << m;
      EXPECT_NE(m.find("timed out"), std::string::npos) << m;
    }
  }
  world.barrier().wait();
}

// Another thread aborts while this one waits in a collective that cannot complete.
TEST(Abort, EndsARunningCollective) {
  auto& world = mp::world();
  auto group = world.split(0, world.rank());
  std::vector<float> data(1 << 16, 1.0f);
  // Rank 0 enters an all-reduce alone (with a single rank it completes; so only on > 1 ranks).
  if (group.size() > 1 && group.rank() == 0) {
    std::thread aborter([&] {
      std::this_thread::sleep_for(200ms);
      group.abort();
    });
    const double s =
        expect_failure(group.all_reduce(buffer(data), ReduceOp::sum), ErrorCode::aborted, 0);
    aborter.join();
    EXPECT_LT(s, 5.0);
  }
  world.barrier().wait();
}

// Between operations, check_health() learns of a peer's abort without a collective to fail: it
// returns while the group is whole, then throws naming the aborting rank (DiLoCo's islands ask it
// every step to log a lost island early).
TEST(Abort, CheckHealthLearnsOfAnAbortBetweenOperations) {
  auto& world = mp::world();
  if (world.size() < 2) GTEST_SKIP() << "needs 2 or more ranks: one aborts, the others ask";
  auto group = world.split(0, world.rank());
  const int last = group.size() - 1;
  EXPECT_NO_THROW(group.check_health());
  world.barrier().wait();
  if (group.rank() == last) {
    group.abort();
  } else {
    const auto until = Clock::now() + 10s;
    bool seen = false;
    while (!seen && Clock::now() < until) {
      try {
        group.check_health();
        std::this_thread::sleep_for(10ms);
      } catch (const Error& e) {
        seen = true;
        EXPECT_EQ(int(e.code()), int(ErrorCode::aborted)) << e.what();
        EXPECT_EQ(e.where().peer, last) << e.what();
        EXPECT_EQ(e.where().op, "check_health") << e.what();
      }
    }
    EXPECT_TRUE(seen) << "check_health() did not learn of the abort in 10 s";
  }
  world.barrier().wait();
}

// A rank aborts the group while it waits in split() for peers that come late (a Ctrl-C in the
// Python module does this): its split fails at once, and so do the peers' when they come, naming
// it. Their split's all-gather may complete from the part it posted; the new group's setup then
// waits for a part it never publishes, and ends once the group learns of the abort (not at
// STRATA_TIMEOUT, 120 s here).
TEST(Abort, EndsASplitAndThePeersSplitNamesTheRank) {
  auto& world = mp::world();
  if (world.size() < 2) GTEST_SKIP() << "needs 2 or more ranks: one aborts, the others split";
  auto group = world.split(0, world.rank());
  auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  world.barrier().wait();
  if (group.rank() == 0) {
    std::thread aborter([&] {
      std::this_thread::sleep_for(300ms);
      group.abort();
    });
    const auto start = Clock::now();
    try {
      group.split(0, 0);
      ADD_FAILURE() << "the split completed without its peers";
    } catch (const Error& e) {
      EXPECT_EQ(int(e.code()), int(ErrorCode::aborted)) << e.what();
    }
    aborter.join();
    EXPECT_LT(seconds_since(start), 5.0);
  }
  world.barrier().wait();
  if (group.rank() != 0) {
    const auto start = Clock::now();
    try {
      group.split(0, 0);
      ADD_FAILURE() << "the split completed without rank 0";
    } catch (const Error& e) {
      EXPECT_EQ(int(e.code()), int(ErrorCode::aborted)) << e.what();
      EXPECT_EQ(e.where().peer, 0) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank 0 aborted the communicator"), std::string::npos)
          << e.what();
    }
    EXPECT_LT(seconds_since(start), 10.0) << "the abort was not noticed before the deadline";
  }
  world.barrier().wait();
}
