// split(color, key): membership, ordering by key, independence, and the negative color.
#include "mp.hpp"
#include "runtime/communicator_impl.hpp"

using namespace strata;

TEST(Split, ByParityReversedKeys) {
  auto& w = mp::world();
  const int color = w.rank() % 2;
  Communicator sub = w.split(color, -w.rank());
  ASSERT_TRUE(sub);
  // Members of my color, ordered by descending world rank.
  std::vector<int> members;
  for (int r = w.size() - 1; r >= 0; --r)
    if (r % 2 == color) members.push_back(r);
  EXPECT_EQ(sub.size(), int(members.size()));
  EXPECT_EQ(members[sub.rank()], w.rank());
  // The sub-group's all_reduce sums only its members' world ranks.
  std::vector<int64_t> v = {w.rank()};
  sub.all_reduce(buffer(v), ReduceOp::sum).wait();
  int64_t want = 0;
  for (int r : members) want += r;
  EXPECT_EQ(v[0], want);
  // Rank order: gather world ranks by sub rank.
  std::vector<int32_t> mine = {w.rank()}, order(sub.size());
  sub.all_gather(buffer(mine), buffer(order)).wait();
  EXPECT_EQ(order, std::vector<int32_t>(members.begin(), members.end()));
}

TEST(Split, NegativeColorGetsEmptyCommunicator) {
  auto& w = mp::world();
  Communicator sub = w.split(w.rank() == 0 ? -1 : 1, 0);
  EXPECT_EQ(bool(sub), w.rank() != 0);
  if (sub) {
    EXPECT_EQ(sub.size(), w.size() - 1);
    std::vector<int32_t> v = {1};
    sub.all_reduce(buffer(v), ReduceOp::sum).wait();
    EXPECT_EQ(v[0], w.size() - 1);
  } else {
    // Refused, naming the call (ErrorContext::op).
    try {
      sub.barrier();
      ADD_FAILURE() << "a barrier on an empty Communicator was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.where().op, "barrier") << e.what();
      EXPECT_NE(std::string(e.what()).find("empty Communicator"), std::string::npos) << e.what();
    }
    try {
      std::vector<int32_t> v = {1};
      sub.send(buffer(v), 0);
      ADD_FAILURE() << "a send on an empty Communicator was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.where().op, "send") << e.what();
    }
  }
}

TEST(Split, NestedAndConcurrentWithParent) {
  auto& w = mp::world();
  Communicator a = w.split(0, w.rank());
  Communicator b = a.split(a.rank() / 2, 0);
  // Operations on the three groups interleave; each group completes its own in order.
  std::vector<int32_t> x = {1}, y = {2}, z = {3};
  Work wx = w.all_reduce(buffer(x), ReduceOp::sum);
  Work wy = a.all_reduce(buffer(y), ReduceOp::max);
  Work wz = b.all_reduce(buffer(z), ReduceOp::sum);
  wz.wait();
  wy.wait();
  wx.wait();
  EXPECT_EQ(x[0], w.size());
  EXPECT_EQ(y[0], 2);
  EXPECT_EQ(z[0], 3 * b.size());
  EXPECT_EQ(b.size(), std::min(2, w.size() - 2 * (a.rank() / 2)));
}

// A child keeps its parent's deadline unless given one: a world made with a short deadline has
// subgroups with it, the mesh's and the ZeRO engine's too (they take no options from a trainer).
TEST(Split, AChildKeepsItsParentsDeadlineUnlessGivenOne) {
  auto& w = mp::world();
  const auto deadline = [](const Communicator& c) { return runtime::GroupAccess::of(c).timeout(); };
  using std::chrono::milliseconds;
  ASSERT_NE(deadline(w), milliseconds(7000)) << "pick another figure: the world's own";
  Communicator parent =
      w.split(0, w.rank(), CommOptions{.name = "short", .timeout = milliseconds(7000)});
  EXPECT_EQ(deadline(parent), milliseconds(7000));
  Communicator child = parent.split(0, parent.rank());
  EXPECT_EQ(deadline(child), milliseconds(7000));
  EXPECT_EQ(deadline(parent.split(0, parent.rank(), CommOptions{.timeout = milliseconds(9000)})),
            milliseconds(9000));
  EXPECT_EQ(deadline(parent.shrink({})), milliseconds(7000));
  w.barrier().wait();
}

// shrink(exclude): the survivors of a failed group form a new one through the store, in their
// order, without the excluded rank taking part.
TEST(Shrink, TheSurvivorsOfAnAbortedGroupFormANewOneInTheirOrder) {
  auto& w = mp::world();
  if (w.size() < 2) GTEST_SKIP() << "needs a rank to lose";
  Communicator g = w.split(0, w.rank(), CommOptions{.name = "doomed"});
  const int last = w.size() - 1;
  std::vector<int32_t> v = {w.rank()};
  if (w.rank() == last) {
    g.abort();
  } else {
    EXPECT_THROW(g.all_reduce(buffer(v), ReduceOp::sum).wait(), Error);
    v = {w.rank()};  // the failed all-reduce may have left a partial sum
    Communicator s = g.shrink({last});
    EXPECT_EQ(s.size(), w.size() - 1);
    EXPECT_EQ(s.rank(), w.rank());
    std::vector<int32_t> order(size_t(s.size()));
    s.all_gather(buffer(v), buffer(order)).wait();
    for (int r = 0; r < s.size(); ++r) EXPECT_EQ(order[size_t(r)], r);
  }
  w.barrier().wait();
}

TEST(Shrink, ARankOutOfRangeRepeatedOrItsOwnIsRefused) {
  auto& w = mp::world();
  auto refused = [&](std::vector<int> x, const std::string& why) {
    try {
      w.shrink(x);
      ADD_FAILURE() << "shrink accepted " << why;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused({w.size()}, "out of range");
  refused({-1}, "out of range");
  refused({w.rank()}, "this rank's own");
  if (w.size() > 1) refused({(w.rank() + 1) % w.size(), (w.rank() + 1) % w.size()}, "twice");
}
