// split(color, key): membership, ordering by key, independence, and the negative color.
#include <sstream>

#include "mp.hpp"

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
    EXPECT_THROW(sub.barrier(), Error);
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

// A job that splits often does not grow its store: once a group is up, each rank erases the
// records it published to set it up (runtime/setup_store.hpp); what stays is one claim per rank.
// The store here is one of this test's own, served by rank 0 where the job's store is (so that
// every node reaches it), so its keys can be counted.
TEST(Split, EachSplitLeavesOnlyItsClaimsInTheStore) {
  auto& w = mp::world();
  const std::string token = "split-growth";
  std::unique_ptr<TcpStoreServer> server;
  std::vector<uint8_t> where(64, 0);  // rank 0's address, then its port
  if (w.rank() == 0) {
    std::string host = w.store()->local_address();
    if (host.empty()) host = "127.0.0.1";
    server = std::make_unique<TcpStoreServer>(TcpStoreOptions{.host = host, .token = token});
    const std::string text = host + " " + std::to_string(server->port());
    std::copy(text.begin(), text.end(), where.begin());
  }
  w.broadcast(buffer(where), 0).wait();
  std::istringstream in(reinterpret_cast<const char*>(where.data()));
  TcpStoreOptions o{.token = token};
  in >> o.host >> o.port;
  auto store = std::make_shared<TcpStore>(o);
  {
    CommOptions co;
    co.name = "growth";
    Communicator g = Communicator::create(store, w.rank(), w.size(), co);
    // A barrier uses the group (a hierarchical all-reduce would add its node and rail groups,
    // each leaving its own claims).
    auto split_once = [&] { g.split(0, g.rank()).barrier().wait(); };
    split_once();
    g.barrier().wait();  // every rank has set up, and cleaned up after, the first split
    const size_t after_one = w.rank() == 0 ? server->keys() : 0;
    constexpr int kSplits = 20;
    for (int i = 0; i < kSplits; ++i) split_once();
    g.barrier().wait();
    if (w.rank() == 0) {
      EXPECT_EQ(server->keys() - after_one, size_t(kSplits) * size_t(w.size()))
          << "keys left by " << kSplits << " splits of " << w.size() << " ranks";
    }
  }
  w.barrier().wait();  // rank 0's server outlives every rank's use of it
}
