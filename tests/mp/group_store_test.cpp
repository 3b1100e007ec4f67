// What a group leaves in its store, and what it finds there when it is created again: each on
// a store of the test's own, served by rank 0 where the job's store is (every node reaches it),
// so that its keys can be counted.
#include <sstream>

#include "mp.hpp"

using namespace strata;

namespace {

// A store served by world rank 0 (`server` there), and every rank's client of it.
std::shared_ptr<TcpStore> own_store(std::unique_ptr<TcpStoreServer>& server,
                                    const std::string& token) {
  auto& w = mp::world();
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
  return std::make_shared<TcpStore>(o);
}

}  // namespace

// A job that splits often does not grow its store: once a group is up, each rank erases the
// records it published to set it up (runtime/setup_store.hpp); what stays is each rank's claim
// (bootstrap/rank_claim.hpp: a counter and who claimed).
TEST(GroupStore, EachSplitLeavesOnlyItsClaims) {
  auto& w = mp::world();
  std::unique_ptr<TcpStoreServer> server;
  auto store = own_store(server, "split-growth");
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
      EXPECT_EQ(server->keys() - after_one, size_t(kSplits) * size_t(w.size()) * 2)
          << "keys left by " << kSplits << " splits of " << w.size() << " ranks";
    }
  }
  w.barrier().wait();  // rank 0's server outlives every rank's use of it
}

// The same processes create a group on the same store three times (torch's destroy and
// init_process_group, or new_group after it, hand Strata the store they used before): each time
// it works, with this round's data.
TEST(GroupStore, TheSameProcessesCreateAGroupAgainOnOneStore) {
  auto& w = mp::world();
  std::unique_ptr<TcpStoreServer> server;
  auto store = own_store(server, "again");
  for (int round = 1; round <= 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    CommOptions co;
    co.name = "again";
    Communicator g =
        Communicator::create(std::make_shared<PrefixStore>(store, "pg"), w.rank(), w.size(), co);
    std::vector<int64_t> v = {int64_t(round) * (w.rank() + 1)};
    g.all_reduce(buffer(v), ReduceOp::sum).wait();
    EXPECT_EQ(v[0], int64_t(round) * w.size() * (w.size() + 1) / 2);
    g.barrier().wait();  // nobody destroys its group while a peer still needs it
  }
  w.barrier().wait();
}
