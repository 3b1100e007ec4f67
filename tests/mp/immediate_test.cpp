// The immediate path (src/comm/immediate.cpp): a small all-reduce on one node completes inside
// the call when the peers are in step, and otherwise hands the rest to the engine, so a call never
// waits for a late peer and issue order always holds. Sizes cover both of its ways: up to 48 bytes
// in one cache line per rank, above in a staging buffer (up to 16 KiB).
#include <sstream>
#include <thread>

#include "mp.hpp"

using namespace strata;

namespace {

std::vector<int32_t> ranks_plus(int size, int32_t base, size_t n) {
  // The sum over ranks r of (base + r + i).
  std::vector<int32_t> want(n);
  for (size_t i = 0; i < n; ++i) want[i] = size * (base + int32_t(i)) + size * (size - 1) / 2;
  return want;
}

std::vector<int32_t> mine(int rank, int32_t base, size_t n) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = base + rank + int32_t(i);
  return v;
}

}  // namespace

// Every rank but the last issues a small all-reduce and only then lets the last rank start its
// own: a call that waited for its peers would never return (the last rank's store wait would
// time out instead). 5 int32: one cache line; 1000: a staging buffer.
TEST(Immediate, CallReturnsBeforeALatePeerArrives) {
  auto& w = mp::world();
  if (w.size() < 2) {
    GTEST_SKIP() << "needs 2 or more ranks (mpirun -np 2 or more): it checks that a rank's "
                    "call returns while another rank has not called yet, and one rank has no other";
  }
  const int last = w.size() - 1;
  Communicator c = w.split(0, w.rank());
  auto store = w.store();
  for (size_t n : {size_t(5), size_t(1000)}) {
    const auto key = [n](int r) {
      return "immediate_test/late/" + std::to_string(n) + "/" + std::to_string(r);
    };
    std::vector<int32_t> v = mine(w.rank(), 100, n);
    Work work;
    if (w.rank() != last) {
      work = c.all_reduce(buffer(v), ReduceOp::sum);
      store->set(key(w.rank()), {1});
    } else {
      std::vector<std::string> others;
      for (int r = 0; r < last; ++r) others.push_back(key(r));
      ASSERT_NO_THROW(store->wait(others, std::chrono::seconds(60)))
          << "an all-reduce call of " << n << " int32 blocked until its late peer arrived";
      work = c.all_reduce(buffer(v), ReduceOp::sum);
    }
    work.wait();
    EXPECT_EQ(v, ranks_plus(w.size(), 100, n)) << n << " int32";
  }
  c.barrier().wait();
}

// Earlier work still queued or running: a small all-reduce must run after it, not overtake it.
TEST(Immediate, SmallCallsKeepIssueOrderBehindQueuedWork) {
  auto& w = mp::world();
  Communicator c = w.split(0, w.rank());
  for (int round = 0; round < 20; ++round) {
    std::vector<int32_t> big = mine(w.rank(), round, size_t(1) << 16);
    std::vector<int32_t> t1 = mine(w.rank(), 1000 + round, 3);
    std::vector<int32_t> t2 = mine(w.rank(), 2000 + round, 12);
    std::vector<int32_t> s3 = mine(w.rank(), 3000 + round, 3000);
    Work a = c.all_reduce(buffer(big), ReduceOp::sum);
    Work b = c.all_reduce(buffer(t1), ReduceOp::sum);
    Work d = c.all_reduce(buffer(t2), ReduceOp::sum);
    Work e = c.all_reduce(buffer(s3), ReduceOp::sum);
    e.wait();
    d.wait();
    b.wait();
    a.wait();
    ASSERT_EQ(big, ranks_plus(w.size(), round, big.size())) << "round " << round;
    ASSERT_EQ(t1, ranks_plus(w.size(), 1000 + round, 3)) << "round " << round;
    ASSERT_EQ(t2, ranks_plus(w.size(), 2000 + round, 12)) << "round " << round;
    ASSERT_EQ(s3, ranks_plus(w.size(), 3000 + round, 3000)) << "round " << round;
  }
  // Every operation is recorded as done, the immediate ones included.
  const std::string table = c.flight_record();
  std::istringstream rows(table);
  int done = 0;
  for (std::string row; std::getline(rows, row);) {
    if (row.empty() || row[0] == '#') continue;
    EXPECT_NE(row.find(" done "), std::string::npos) << row << "\n" << table;
    ++done;
  }
  EXPECT_EQ(done, 81) << table;  // split's barrier, then 20 rounds of four
}

// A long run of back-to-back small calls, in place, staggered so that some complete in the call
// and some are finished by the engine: every result must be exact. Every third call is staged
// (a staging buffer instead of a cache line).
TEST(Immediate, BackToBackSmallCallsStayExact) {
  auto& w = mp::world();
  Communicator c = w.split(0, w.rank());
  for (int k = 0; k < 2000; ++k) {
    std::vector<int32_t> v = mine(w.rank(), k, k % 3 == 0 ? 700 : 2);
    if (k % 97 == w.rank()) std::this_thread::sleep_for(std::chrono::microseconds(200));
    c.all_reduce(buffer(v), ReduceOp::sum).wait();
    ASSERT_EQ(v, ranks_plus(w.size(), k, v.size())) << "call " << k;
  }
}
