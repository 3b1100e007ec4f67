// Bad arguments are rejected before any byte moves, with an error naming rank, group, operation,
// sequence number and peer; waits end at their deadline with an error naming the peer.
#include <algorithm>
#include <numeric>
#include <thread>

#include "mp.hpp"

using namespace strata;
using mp::expect_error;

namespace {

std::string on_rank() {
  return "on rank " + std::to_string(mp::world().rank()) + " of group world";
}

}  // namespace

TEST(BadArguments, NullBufferWithCount) {
  auto& w = mp::world();
  std::vector<float> out(4);
  expect_error(
      [&] {
        w.all_reduce(Buffer{nullptr, 4, DataType::f32}, buffer(out), ReduceOp::sum);
      },
      ErrorCode::invalid_argument, {"all_reduce", on_rank(), "input is null with count 4", "seq"});
  // Null with count 0 is fine (nothing to move).
  w.all_reduce(Buffer{nullptr, 0, DataType::f32}, Buffer{nullptr, 0, DataType::f32}, ReduceOp::sum)
      .wait();
}

TEST(BadArguments, CountAndDtypeMismatch) {
  auto& w = mp::world();
  std::vector<float> a(8), b(7);
  std::vector<double> d(8);
  expect_error([&] { w.all_reduce(buffer(a), buffer(b), ReduceOp::sum); },
               ErrorCode::invalid_argument, {"output has 7 elements, expected 8"});
  expect_error([&] { w.all_reduce(buffer(a), buffer(d), ReduceOp::sum); },
               ErrorCode::invalid_argument, {"input dtype f32 differs from output dtype f64"});
  std::vector<float> big(8 * w.size() + 1);
  expect_error([&] { w.all_gather(buffer(a), buffer(big)); }, ErrorCode::invalid_argument,
               {"all_gather", "output has"});
  expect_error([&] { w.reduce_scatter(buffer(big), buffer(a), ReduceOp::sum); },
               ErrorCode::invalid_argument, {"reduce_scatter", "input has"});
  if (w.size() > 1) {
    std::vector<float> odd(w.size() + 1);
    expect_error([&] { w.all_to_all(buffer(odd), buffer(odd)); }, ErrorCode::invalid_argument,
                 {"not a multiple of the group size"});
  }
  // All-to-all moves equal blocks both ways: a larger output is refused as a smaller one is.
  std::vector<float> blocks(2 * w.size()), more(2 * w.size() + 2);
  expect_error([&] { w.all_to_all(buffer(blocks), buffer(more)); }, ErrorCode::invalid_argument,
               {"all_to_all", "output has " + std::to_string(more.size()) + " elements, expected " +
                                  std::to_string(blocks.size())});
}

TEST(BadArguments, PeerAndRootOutOfRange) {
  auto& w = mp::world();
  std::vector<int32_t> v(4);
  const std::string n = std::to_string(w.size());
  expect_error([&] { w.send(buffer(v), w.size()); }, ErrorCode::invalid_argument,
               {"send", "peer " + n + " is out of range for a group of " + n});
  expect_error([&] { w.recv(buffer(v), -2); }, ErrorCode::invalid_argument,
               {"recv", "peer -2 is out of range"});
  // kAnySource (-1) is a peer only for receives.
  expect_error([&] { w.send(buffer(v), kAnySource); }, ErrorCode::invalid_argument,
               {"send", "peer -1 is out of range"});
  expect_error([&] { w.broadcast(buffer(v), w.size() + 3); }, ErrorCode::invalid_argument,
               {"broadcast", "root " + std::to_string(w.size() + 3)});
  expect_error([&] { w.reduce(buffer(v), buffer(v), ReduceOp::max, -2); },
               ErrorCode::invalid_argument, {"reduce", "root -2"});
}

TEST(BadArguments, OverlappingBuffers) {
  auto& w = mp::world();
  std::vector<float> v(64);
  // Output starts inside the input but is not the in-place layout.
  expect_error(
      [&] {
        w.all_reduce(Buffer{v.data(), 32, DataType::f32}, Buffer{v.data() + 1, 32, DataType::f32},
                     ReduceOp::sum);
      },
      ErrorCode::invalid_argument, {"overlap"});
  if (w.size() > 1) {
    std::vector<float> a(8 * w.size());
    expect_error([&] { w.all_to_all(buffer(a), buffer(a)); }, ErrorCode::invalid_argument,
                 {"overlap"});
  }
}

TEST(BadArguments, UnknownEnumsAndDeviceMemory) {
  auto& w = mp::world();
  std::vector<float> v(4);
  expect_error([&] { w.all_reduce(buffer(v), ReduceOp(42)); }, ErrorCode::invalid_argument,
               {"unknown reduction op"});
  expect_error(
      [&] {
        w.all_reduce(Buffer{v.data(), 4, DataType(99)}, ReduceOp::sum);
      },
      ErrorCode::invalid_argument, {"unknown dtype"});
  expect_error([&] { w.all_reduce(buffer(v, MemoryKind::cuda), ReduceOp::sum); },
               ErrorCode::invalid_argument, {"CUDA device memory"});
  expect_error([&] { w.all_reduce(buffer(v), ReduceOp::bxor); }, ErrorCode::invalid_argument,
               {"bxor is not supported for f32"});
  std::vector<double> c(8);
  expect_error(
      [&] {
        w.reduce(Buffer{c.data(), 4, DataType::c128}, Buffer{c.data(), 4, DataType::c128},
                 ReduceOp::max, 0);
      },
      ErrorCode::invalid_argument, {"max is not supported for c128"});
}

// Counts are bounded by their element's size: 2^60 complex128 elements are 2^64 bytes, which an
// 8-byte bound let through (all-reduce then crashed, broadcast reported success).
TEST(BadArguments, CountsThatOverflowTheirBytesAreRefused) {
  auto& w = mp::world();
  std::vector<double> c(8);
  const size_t huge = size_t(1) << 60;
  const Buffer big{c.data(), huge, DataType::c128};
  expect_error(
      [&] { w.all_reduce(big, ReduceOp::sum); }, ErrorCode::invalid_argument,
      {"all_reduce", "input count 1152921504606846976 is too large", "c128 elements of 16 bytes"});
  expect_error([&] { w.broadcast(big, 0); }, ErrorCode::invalid_argument,
               {"broadcast", "too large"});
  expect_error(
      [&] {
        w.all_reduce(Buffer{c.data(), size_t(-2), DataType::f32}, ReduceOp::sum);
      },
      ErrorCode::invalid_argument, {"(a negative count, -2?)"});
  if (w.size() > 1) {
    // Each buffer fits; the group's size times the output's count does not (2^62 bytes x n).
    const Buffer block{c.data(), size_t(1) << 58, DataType::c128}, in{c.data(), 4, DataType::c128};
    expect_error([&] { w.reduce_scatter(in, block, ReduceOp::sum); }, ErrorCode::invalid_argument,
                 {"reduce_scatter", "output count 288230376151711744 times the group's " +
                                        std::to_string(w.size()) + " ranks is too large"});
    expect_error([&] { w.all_gather(block, in); }, ErrorCode::invalid_argument,
                 {"all_gather", "input count", "is too large"});
  }
  // all_to_allv's errors say all_to_allv.
  std::vector<float> v(w.size());
  std::vector<size_t> ones(w.size(), 1), displs(w.size()), bad(w.size() + 1, 1);
  std::iota(displs.begin(), displs.end(), size_t(0));
  expect_error([&] { w.all_to_allv(buffer(v), bad, displs, buffer(v), ones, displs); },
               ErrorCode::invalid_argument, {"all_to_allv failed", "one entry per rank"});
  // A count of -1 from C or Python reaches here as 2^64 - 1: said so, not printed as a range.
  std::vector<size_t> wrapped = ones;
  wrapped[0] = size_t(-1);
  expect_error([&] { w.all_to_allv(buffer(v), wrapped, displs, buffer(v), ones, displs); },
               ErrorCode::invalid_argument,
               {"send block for rank 0 (18446744073709551615 elements from element 0 (a negative "
                "number, read as unsigned?)) does not fit the input's"});
  // Receive blocks over the same elements: the data would depend on which arrived last.
  if (w.size() > 1) {
    std::vector<size_t> overlapping = displs;
    overlapping[1] = 0;
    expect_error([&] { w.all_to_allv(buffer(v), ones, displs, buffer(v), ones, overlapping); },
                 ErrorCode::invalid_argument,
                 {"receive blocks for ranks 0 (1 elements from element 0) and 1 (1 elements from "
                  "element 0) overlap"});
  }
}

// A send's or receive's argument error carries the number that send or receive would get (they
// are numbered apart from the collectives), not the next collective's.
TEST(BadArguments, APeerOpsErrorCarriesItsOwnSequenceNumber) {
  auto& w = mp::world();
  if (w.size() < 2) GTEST_SKIP() << "needs a peer (world size 1)";
  Communicator g = w.split(0, w.rank(), CommOptions{.name = "seqs"});
  for (int i = 0; i < 3; ++i) g.barrier().wait();  // collectives 0-2
  std::vector<int32_t> v(4, g.rank());
  const int next = (g.rank() + 1) % g.size(), prev = (g.rank() + g.size() - 1) % g.size();
  Work r = g.recv(buffer(v), prev);  // this rank's send and receive 0 and 1
  g.send(buffer(v), next).wait();
  r.wait();
  try {
    g.send(buffer(v), g.size());
    ADD_FAILURE() << "a send to rank " << g.size() << " was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().seq, 2) << e.what();
    EXPECT_EQ(e.where().op, "send") << e.what();
  }
  g.barrier().wait();
}

// Creation's own arguments: each problem named, the rank included when it is the problem.
TEST(BadArguments, CreateNamesWhatIsWrong) {
  auto& w = mp::world();
  CommOptions o;
  o.name = "bad";
  expect_error([&] { Communicator::create(w.store(), -1, 1, o); }, ErrorCode::invalid_argument,
               {"create failed", "group bad", "rank -1 is not a rank of a group of 1 (0 to 0)"});
  expect_error([&] { Communicator::create(w.store(), 3, 3, o); }, ErrorCode::invalid_argument,
               {"rank 3 is not a rank of a group of 3 (0 to 2)"});
  expect_error([&] { Communicator::create(w.store(), 0, 0, o); }, ErrorCode::invalid_argument,
               {"a group of 0 ranks: it needs at least 1"});
  expect_error([&] { Communicator::create(nullptr, 0, 1, o); }, ErrorCode::invalid_argument,
               {"no store given"});
}

TEST(BadArguments, RejectedCallsLeaveTheCommunicatorUsable) {
  auto& w = mp::world();
  std::vector<int32_t> v = {w.rank()};
  w.all_reduce(buffer(v), ReduceOp::sum).wait();
  EXPECT_EQ(v[0], w.size() * (w.size() - 1) / 2);
}

TEST(Deadlines, UnmatchedRecvTimesOutNamingThePeer) {
  auto& w = mp::world();
  if (w.size() < 2) GTEST_SKIP() << "needs a peer (world size 1)";
  CommOptions o;
  o.name = "short";
  o.timeout = std::chrono::milliseconds(1000);
  Communicator s = w.split(0, w.rank(), o);
  std::vector<float> v(16);
  if (s.rank() == 0) {
    auto t0 = Clock::now();
    Work r = s.recv(buffer(v), 1, 77);  // rank 1 never sends
    expect_error([&] { r.wait(); }, ErrorCode::timeout,
                 {"recv", "rank 0 of group short", "peer 1", "timed out"});
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_GE(secs, 0.9);
    EXPECT_LT(secs, 10.0);
  }
  w.barrier().wait();
}

TEST(Deadlines, CollectiveWithAMissingRankTimesOut) {
  auto& w = mp::world();
  if (w.size() < 2) GTEST_SKIP() << "needs a peer (world size 1)";
  CommOptions o;
  o.name = "short";
  o.timeout = std::chrono::milliseconds(1000);
  Communicator s = w.split(0, w.rank(), o);
  std::vector<float> v(1024, 1.0f);
  if (s.rank() != 0) {  // rank 0 never joins
    expect_error([&] { s.all_reduce(buffer(v), ReduceOp::sum).wait(); }, ErrorCode::timeout,
                 {"all_reduce", "group short", "seq 1", "timed out"});
    // The group is now unusable, and says why.
    expect_error([&] { s.barrier().wait(); }, ErrorCode::aborted, {"earlier failure"});
  }
  w.barrier().wait();
}

TEST(Deadlines, WorkWaitWithShortTimeoutThenCompletes) {
  auto& w = mp::world();
  if (w.size() < 2) GTEST_SKIP() << "needs a peer (world size 1)";
  // On a group of its own deadline, which the error states.
  Communicator g = w.split(0, w.rank(), {.name = "waits", .timeout = std::chrono::seconds(70)});
  std::vector<int32_t> v(8, 0);
  if (w.rank() == 0) {
    Work r = g.recv(buffer(v), 1, 5);
    expect_error([&] { r.wait(std::chrono::milliseconds(50)); }, ErrorCode::timeout,
                 {"recv failed on rank 0 of group waits", "peer 1", "Work::wait", "still pending",
                  "its own deadline, the communicator's, is 70000 ms"});
    EXPECT_FALSE(r.test());
    w.barrier().wait();  // now let rank 1 send
    r.wait();
    EXPECT_EQ(v, std::vector<int32_t>(8, 42));
  } else {
    w.barrier().wait();
    if (w.rank() == 1) {
      std::vector<int32_t> s(8, 42);
      g.send(buffer(s), 0, 5).wait();
    }
  }
  w.barrier().wait();
}

// A wait counts its deadline from the group's last progress, not from the call: rank 0 queues
// 130 all-reduces and waits on the last while the other ranks join them one every 50 ms, so its
// queue progresses steadily for 6.5 s, past what a wait used to allow (the deadline plus 5 s,
// after which it failed with every operation progressing, and strata-perf then freed its
// buffers under the queue). Disabled in the other runs (it takes 7 s); CTest runs it alone
// (mp_deep_queue_np2, --gtest_also_run_disabled_tests).
TEST(DeepQueue, DISABLED_AWaitBehindAHealthyQueueWaitsForIt) {
  auto& w = mp::world();
  if (w.size() < 2) GTEST_SKIP() << "needs a peer (world size 1)";
  CommOptions o;
  o.name = "deep";
  o.timeout = std::chrono::milliseconds(300);  // each operation's; a wait's 0.6 s of no progress
  Communicator g = w.split(0, w.rank(), o);
  constexpr int kOps = 130;
  std::vector<float> v(1 << 12, float(g.rank() + 1));
  const auto t0 = Clock::now();
  if (g.rank() == 0) {
    std::vector<Work> queued;
    for (int i = 0; i < kOps; ++i) queued.push_back(g.all_reduce(buffer(v), ReduceOp::max));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the progress thread drives
    queued.back().wait();
    for (const Work& q : queued) EXPECT_TRUE(q.test());
    // The case under test: the queue outlasted what the old wait allowed (0.3 s + 5 s).
    EXPECT_GT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.6);
  } else {
    for (int i = 0; i < kOps; ++i) {
      g.all_reduce(buffer(v), ReduceOp::max).wait();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], float(g.size())) << "element " << i;
  w.barrier().wait();
}
