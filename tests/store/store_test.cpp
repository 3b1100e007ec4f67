// The TCP store's semantics (binary values, blocking GET and WAIT, atomic ADD, prefixes),
// deadlines and reconnection. Connecting: store_connect_test.cpp; hostile input:
// store_hostile_test.cpp and store_malformed_test.cpp.
#include "tests/store/store_helpers.hpp"

using namespace store_test;

TEST(TcpStore, SetGetRoundTripsBinaryValues) {
  TcpStoreServer server(opts(0));
  TcpStore c(opts(server.port()));
  Bytes mib(size_t(1) << 20);
  std::mt19937 rng(7);
  for (auto& b : mib) b = uint8_t(rng());
  const Bytes nuls = {0, 0, 0xff, 0, 0x80};
  const std::string binary_key("k\0\xff/x", 5);
  const std::string longest_key(store::kMaxKeyBytes, 'k');

  c.set("empty", {});
  c.set("mib", mib);
  c.set(binary_key, nuls);
  c.set(longest_key, bytes("long"));
  c.set("", bytes("empty key"));
  EXPECT_EQ(c.get("empty", 2s), Bytes{});
  EXPECT_EQ(c.get("mib", 2s), mib);
  EXPECT_EQ(c.get(binary_key, 2s), nuls);
  EXPECT_EQ(c.get(longest_key, 2s), bytes("long"));
  EXPECT_EQ(c.get("", 2s), bytes("empty key"));
  c.set("mib", bytes("replaced"));
  EXPECT_EQ(c.get("mib", 2s), bytes("replaced"));

  TcpStore other(opts(server.port()));  // the same data through another connection
  EXPECT_EQ(other.get(binary_key, 2s), nuls);
  EXPECT_EQ(other.get("empty", 2s), Bytes{});
  EXPECT_EQ(server.rejected_connections(), 0u);
}

TEST(TcpStore, LimitsHoldAndOversizedRequestsFailBeforeSending) {
  TcpStoreServer server(opts(0));
  TcpStore c(opts(server.port()));
  Bytes largest(store::kMaxValueBytes, 0x5a);
  largest.front() = 1;
  largest.back() = 2;
  c.set("largest", largest);
  EXPECT_EQ(c.get("largest", 20s), largest);

  error_of(ErrorCode::invalid_argument, [&] { c.set("k", Bytes(store::kMaxValueBytes + 1)); });
  const std::string long_key(store::kMaxKeyBytes + 1, 'k');
  error_of(ErrorCode::invalid_argument, [&] { c.get(long_key, 1s); });
  error_of(ErrorCode::invalid_argument, [&] { c.add(long_key, 1); });
  error_of(ErrorCode::invalid_argument, [&] { c.wait({"a", long_key}, 1s); });
  error_of(ErrorCode::invalid_argument,
           [&] { c.wait(std::vector<std::string>(store::kMaxWaitKeys + 1, "k"), 1s); });
  error_of(ErrorCode::invalid_argument,
           [&] { TcpStore t(opts(server.port(), std::string(store::kMaxTokenBytes + 1, 't'))); });

  c.set("after", bytes("still fine"));  // nothing above touched the connection
  EXPECT_EQ(c.get("after", 2s), bytes("still fine"));
  EXPECT_EQ(server.rejected_connections(), 0u);
}

TEST(TcpStore, GetBlocksUntilAnotherClientSetsTheKey) {
  TcpStoreServer server(opts(0));
  TcpStore setter(opts(server.port()));
  std::vector<std::future<Bytes>> getters;
  const auto t0 = Clock::now();
  for (int i = 0; i < 4; ++i) {
    getters.push_back(std::async(std::launch::async, [&] {
      TcpStore c(opts(server.port()));
      return c.get("late", 10s);
    }));
  }
  std::this_thread::sleep_for(300ms);
  for (auto& g : getters) EXPECT_EQ(g.wait_for(0s), std::future_status::timeout);  // still blocked
  setter.set("late", bytes("here"));
  for (auto& g : getters) EXPECT_EQ(g.get(), bytes("here"));
  EXPECT_GE(since(t0), 300ms);
  EXPECT_LT(since(t0), 5s);
}

TEST(TcpStore, ConcurrentAddsFromEightClientsAreAtomic) {
  TcpStoreServer server(opts(0));
  std::vector<std::vector<int64_t>> seen(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      try {
        TcpStore c(opts(server.port()));
        for (int i = 0; i < 100; ++i) seen[t].push_back(c.add("counter", 1));
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  std::set<int64_t> all;
  for (const auto& s : seen) {
    EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
    all.insert(s.begin(), s.end());
  }
  // Every increment returned a distinct value: no two clients saw the same intermediate state.
  ASSERT_EQ(all.size(), 800u);
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), 800);
  TcpStore c(opts(server.port()));
  EXPECT_EQ(c.add("counter", 0), 800);
  EXPECT_EQ(c.get("counter", 1s), bytes("800"));  // counters read back as decimal text
  EXPECT_EQ(c.add("counter", -1000), -200);
}

TEST(TcpStore, OneClientIsSafeToShareBetweenThreads) {
  TcpStoreServer server(opts(0));
  TcpStore c(opts(server.port()));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int i = 0; i < 50; ++i) {
          // Built with appends only: g++ 12 misfires -Wrestrict on "literal" + std::string.
          std::string k = "t";
          k += std::to_string(t);
          k += '/';
          k += std::to_string(i);
          c.set(k, bytes(k));
          EXPECT_EQ(c.get(k, 2s), bytes(k));
          c.add("shared", 1);
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.add("shared", 0), 200);
}

TEST(TcpStore, AddOnANonCounterIsAnErrorAndTheClientStaysUsable) {
  TcpStoreServer server(opts(0));
  TcpStore c(opts(server.port()));
  c.set("text", bytes("hello"));
  auto msg = error_of(ErrorCode::invalid_argument, [&] { c.add("text", 1); });
  EXPECT_TRUE(contains(msg, "'text'")) << msg;
  EXPECT_TRUE(contains(msg, "store.add")) << msg;
  EXPECT_EQ(c.get("text", 1s), bytes("hello"));  // unchanged, and the connection still in step

  c.set("seeded", bytes("41"));  // a decimal value can seed a counter
  EXPECT_EQ(c.add("seeded", 1), 42);
  EXPECT_EQ(c.add("big", INT64_MAX), INT64_MAX);
  msg = error_of(ErrorCode::invalid_argument, [&] { c.add("big", 1); });
  EXPECT_TRUE(contains(msg, "overflow")) << msg;
  EXPECT_EQ(c.add("big", 0), INT64_MAX);
  EXPECT_EQ(c.add("negative", -5), -5);
  EXPECT_EQ(server.rejected_connections(), 0u);
}

TEST(TcpStore, WaitReturnsOnceEveryKeyIsSet) {
  TcpStoreServer server(opts(0));
  TcpStore a(opts(server.port())), b(opts(server.port()));
  a.wait({}, 1s);
  const auto t0 = Clock::now();
  std::thread setter([&] {
    for (const char* k : {"k1", "k2", "k3"}) {
      std::this_thread::sleep_for(100ms);
      b.set(k, bytes(k));
    }
  });
  a.wait({"k1", "k2", "k3"}, 10s);
  const auto took = since(t0);
  setter.join();
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 5s);
  EXPECT_EQ(a.get("k3", 1s), bytes("k3"));

  const auto t1 = Clock::now();
  a.wait({"k1", "k3", "k1"}, 1s);  // all present: immediate
  EXPECT_LT(since(t1), 500ms);
  auto msg = error_of(ErrorCode::timeout, [&] { a.wait({"k1", "missing"}, 200ms); });
  EXPECT_TRUE(contains(msg, "'missing'")) << msg;
  EXPECT_TRUE(contains(msg, "200 ms")) << msg;
  EXPECT_EQ(a.get("k2", 1s), bytes("k2"));
}

TEST(TcpStore, GetTimeoutThrowsAndTheClientStaysUsable) {
  TcpStoreServer server(opts(0));
  TcpStore c(opts(server.port())), other(opts(server.port()));
  const auto t0 = Clock::now();
  auto msg = error_of(ErrorCode::timeout, [&] { c.get("never", 300ms); });
  const auto took = since(t0);
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 2s);
  EXPECT_TRUE(contains(msg, "'never'")) << msg;
  EXPECT_TRUE(contains(msg, "300 ms")) << msg;
  EXPECT_TRUE(contains(msg, "store.get")) << msg;
  EXPECT_TRUE(contains(msg, "127.0.0.1:" + std::to_string(server.port()))) << msg;

  // The abandoned GET could now be answered; that answer must not be taken for a later reply.
  other.set("never", bytes("stale"));
  other.set("fresh", bytes("fresh"));
  EXPECT_EQ(c.get("fresh", 2s), bytes("fresh"));
  EXPECT_EQ(c.get("never", 2s), bytes("stale"));
  EXPECT_EQ(c.add("n", 2), 2);
  for (int i = 0; i < 3; ++i) error_of(ErrorCode::timeout, [&] { c.get("never2", 50ms); });
  EXPECT_EQ(c.add("n", 1), 3);
  EXPECT_EQ(server.rejected_connections(), 0u);
}

// ERASE deletes one key (a missing one is no error), through prefixes too; the server counts
// what it holds.
TEST(TcpStore, EraseDeletesAKeyAndTheServerCountsItsKeys) {
  TcpStoreServer server(opts(0));
  auto base = std::make_shared<TcpStore>(opts(server.port()));
  PrefixStore g(base, "g");
  EXPECT_EQ(server.keys(), 0u);
  base->set("kept", bytes("1"));
  g.set("node/0", bytes("record"));
  g.add("claims/0", 1);
  EXPECT_EQ(server.keys(), 3u);
  g.erase("node/0");
  g.erase("node/0");  // gone already: no error
  base->erase("never-set");
  EXPECT_EQ(server.keys(), 2u);
  error_of(ErrorCode::timeout, [&] { g.get("node/0", 100ms); });
  EXPECT_EQ(base->get("kept", 1s), bytes("1"));
  EXPECT_EQ(g.add("claims/0", 0), 1);
  g.set("node/0", bytes("again"));  // a key can come back
  EXPECT_EQ(g.get("node/0", 1s), bytes("again"));
  EXPECT_EQ(server.keys(), 3u);
}

TEST(TcpStore, PrefixStoresIsolateNamespaces) {
  TcpStoreServer server(opts(0));
  auto base = std::make_shared<TcpStore>(opts(server.port()));
  PrefixStore a(base, "a"), b(base, "b");
  a.set("k", bytes("from a"));
  b.set("k", bytes("from b"));
  EXPECT_EQ(a.get("k", 1s), bytes("from a"));
  EXPECT_EQ(b.get("k", 1s), bytes("from b"));
  EXPECT_EQ(base->get("a/k", 1s), bytes("from a"));
  EXPECT_EQ(base->get("b/k", 1s), bytes("from b"));
  EXPECT_EQ(a.add("n", 1), 1);
  EXPECT_EQ(b.add("n", 5), 5);
  EXPECT_EQ(a.add("n", 1), 2);

  b.set("only-b", bytes("x"));
  auto msg = error_of(ErrorCode::timeout, [&] { a.get("only-b", 100ms); });
  EXPECT_TRUE(contains(msg, "'a/only-b'")) << msg;
  a.set("x", bytes("1"));
  a.wait({"k", "x"}, 1s);
  error_of(ErrorCode::timeout, [&] { b.wait({"k", "x"}, 100ms); });

  PrefixStore nested(std::make_shared<PrefixStore>(base, "a"), "sub");
  nested.set("k", bytes("deep"));
  EXPECT_EQ(base->get("a/sub/k", 1s), bytes("deep"));
  EXPECT_EQ(a.get("k", 1s), bytes("from a"));
  error_of(ErrorCode::invalid_argument, [] { PrefixStore p(nullptr, "x"); });
}

TEST(TcpStore, ServerShutdownFailsABlockedGetWithPeerFailure) {
  auto server = std::make_unique<TcpStoreServer>(opts(0));
  const uint16_t port = server->port();
  TcpStore c(opts(port));
  auto blocked = std::async(std::launch::async, [&]() -> std::string {
    try {
      c.get("never", 20s);
      return "no error";
    } catch (const Error& e) {
      return (e.code() == ErrorCode::peer_failure ? "" : "wrong code: ") + std::string(e.what());
    }
  });
  std::this_thread::sleep_for(200ms);
  const auto t0 = Clock::now();
  server.reset();  // joins its thread and closes every connection
  ASSERT_EQ(blocked.wait_for(5s), std::future_status::ready);
  const std::string msg = blocked.get();
  EXPECT_LT(since(t0), 2s);
  EXPECT_TRUE(contains(msg, "closed the connection")) << msg;
  EXPECT_TRUE(contains(msg, "127.0.0.1:" + std::to_string(port))) << msg;
}

TEST(TcpStore, ACallAfterTheServerIsGoneFailsAtOnceInsteadOfRetryingToConnect) {
  auto server = std::make_unique<TcpStoreServer>(opts(0));
  const uint16_t port = server->port();
  TcpStoreOptions o = opts(port);
  o.connect_timeout = 60s;  // retrying the refused reconnection would take this long
  TcpStore c(o);
  c.set("k", bytes("v"));
  server.reset();
  // The first call finds the connection closed; the next one must not wait for a server that
  // was up and is gone (a survivor reporting a failure after rank 0 died).
  EXPECT_THROW(c.add("n", 1), Error);
  try {
    c.add("n", 1);
    ADD_FAILURE() << "a call to a store that is gone succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::peer_failure) << e.what();
    EXPECT_TRUE(contains(e.what(), "is gone")) << e.what();
    EXPECT_TRUE(contains(e.what(), "127.0.0.1:" + std::to_string(port))) << e.what();
  }
}

TEST(TcpStore, ATimedOutGetKeepsItsConnectionAndAClosedOneSetsItsWill) {
  TcpStoreServer server(opts(0));
  TcpStore watcher(opts(server.port()));
  {
    TcpStore c(opts(server.port()));
    EXPECT_TRUE(c.set_when_gone("gone/c", bytes("1")));
    for (int i = 0; i < 3; ++i) {
      error_of(ErrorCode::timeout, [&] { c.get("never", 50ms); });
      error_of(ErrorCode::timeout, [&] { c.wait({"never", "nor"}, 50ms); });
    }
    error_of(ErrorCode::timeout, [&] { c.get("never", 0ms); });
    // Had any timeout cost c its connection, its will would have come true.
    error_of(ErrorCode::timeout, [&] { watcher.get("gone/c", 100ms); });
    EXPECT_EQ(server.open_connections(), 2u);
    EXPECT_EQ(c.add("n", 1), 1);
  }
  // Closing it (as its process's end would) sets the key, and wakes a waiter parked on it.
  EXPECT_EQ(watcher.get("gone/c", 2s), bytes("1"));
  EXPECT_EQ(watcher.add("gone/c", 0), 1);  // the form get_published polls
  PrefixStore prefixed(std::make_shared<TcpStore>(opts(server.port())), "comm/");
  EXPECT_TRUE(prefixed.set_when_gone("gone/7", bytes("1")));
  EXPECT_EQ(server.rejected_connections(), 0u);
}
