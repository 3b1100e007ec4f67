// The TCP store under hostile connections (a wrong token, another protocol version, silence,
// a flood): each must close only the offending connection, be counted and logged, and never
// stop the server answering good clients. Malformed frames: store_malformed_test.cpp.
#include "tests/store/store_helpers.hpp"

using namespace store_test;

TEST(TcpStore, WrongTokenIsRefusedCountedAndLoggedWhileGoodClientsCarryOn) {
  TcpStoreServer server(opts(0));
  TcpStore good(opts(server.port()));
  good.set("a", bytes("1"));
  StderrCapture log;
  const uint64_t before = server.rejected_connections();
  // Refused, not gone: a client misconfigured for this store (invalid_argument), not a peer
  // failure that would blame the store's rank.
  auto msg = error_of(ErrorCode::invalid_argument,
                      [&] { TcpStore bad(opts(server.port(), "not-the-token")); });
  EXPECT_TRUE(contains(msg, "wrong job token")) << msg;
  EXPECT_TRUE(contains(msg, "127.0.0.1:" + std::to_string(server.port()))) << msg;
  EXPECT_TRUE(eventually([&] { return server.rejected_connections() == before + 1; }));
  EXPECT_EQ(good.get("a", 2s), bytes("1"));
  EXPECT_EQ(good.add("c", 1), 1);
  if (warnings_logged()) {
    EXPECT_EQ(log.lines_with({"WARN", "STORE", kRefused, "wrong job token"}).size(), 1u)
        << log.text();
  }
}

// A client of another protocol version is told so, and fails at once instead of retrying a
// handshake it takes for crowded out.
TEST(TcpStore, AnotherProtocolVersionIsAnsweredWithAnError) {
  TcpStoreServer server(opts(0));
  Raw r(server.port());
  r.send(header(store::kMagic, 7, 1, uint32_t(kToken.size())) + bytes(kToken));
  const auto head = r.read(store::kHeaderBytes);
  ASSERT_TRUE(head.has_value());
  std::string why;
  const auto h = store::parse_header(head->data(), why);
  ASSERT_TRUE(h.has_value()) << why;
  EXPECT_EQ(h->type, store::Type::error);
  const auto text = r.read(h->length);
  ASSERT_TRUE(text.has_value());
  EXPECT_TRUE(contains(std::string(text->begin(), text->end()), "protocol version 7")) << h->length;
  EXPECT_TRUE(r.closed_within(3s));
}

// Takes ten seconds: that is the HELLO deadline being tested.
TEST(TcpStore, SilentAndHalfSentConnectionsStallNobodyAndUnauthenticatedOnesExpire) {
  TcpStoreServer server(opts(0));
  TcpStore good(opts(server.port())), other(opts(server.port()));
  StderrCapture log;
  const uint64_t before = server.rejected_connections();
  const auto hello = hello_frame();
  const auto set = set_frame("from-raw", bytes("finished"));
  const auto opened = Clock::now();
  Raw silent(server.port());
  Raw half_header(server.port());
  half_header.send({hello.begin(), hello.begin() + 6});
  Raw half_hello(server.port());
  half_hello.send({hello.begin(), hello.end() - 2});
  Raw half_set(server.port());  // authenticated, then half a request: it may take its time
  half_set.send(hello);
  EXPECT_EQ(half_set.read(kOkFrame.size()), kOkFrame);
  half_set.send({set.begin(), set.begin() + 20});

  // Meanwhile everybody else is served at once, blocking calls included.
  const auto t0 = Clock::now();
  good.set("x", bytes("1"));
  EXPECT_EQ(good.get("x", 1s), bytes("1"));
  EXPECT_EQ(good.add("n", 1), 1);
  std::thread later([&] {
    std::this_thread::sleep_for(50ms);
    other.set("y", bytes("2"));
  });
  good.wait({"x", "y"}, 2s);
  EXPECT_EQ(good.get("y", 1s), bytes("2"));
  later.join();
  EXPECT_LT(since(t0), 3s);  // a stall would be the 10 s HELLO deadline
  EXPECT_EQ(server.rejected_connections(), before);

  // Those that never completed a HELLO are dropped after 10 s; the authenticated one stays.
  EXPECT_TRUE(silent.closed_within(13s));
  EXPECT_TRUE(half_header.closed_within(2s));
  EXPECT_TRUE(half_hello.closed_within(2s));
  EXPECT_GE(since(opened), 9500ms);
  EXPECT_TRUE(eventually([&] { return server.rejected_connections() == before + 3; }));
  EXPECT_FALSE(half_set.closed_within(100ms));
  half_set.send({set.begin() + 20, set.end()});
  EXPECT_EQ(half_set.read(kOkFrame.size()), kOkFrame);
  EXPECT_EQ(good.get("from-raw", 1s), bytes("finished"));
  if (warnings_logged()) {
    EXPECT_EQ(log.lines_with({"WARN", kRefused, "no HELLO within 10 s"}).size(), 1u) << log.text();
  }
}

TEST(TcpStore, RefusalsAreLoggedOncePerCauseWithACount) {
  StderrCapture log;
  {
    TcpStoreServer server(opts(0));
    for (int i = 0; i < 5; ++i) {
      Raw r(server.port());
      r.send(hello_frame("not the token"));
      EXPECT_TRUE(r.closed_within(2s));
    }
    for (int i = 0; i < 3; ++i) {
      Raw r(server.port());
      r.send(bytes("GET / HTTP/1.1\r\n\r\n"));
      EXPECT_TRUE(r.closed_within(2s));
    }
    EXPECT_TRUE(eventually([&] { return server.rejected_connections() == 8; }));
  }  // the server's end logs what it only counted
  if (!warnings_logged()) return;
  EXPECT_EQ(log.lines_with({"WARN", kRefused}).size(), 2u) << log.text();
  EXPECT_EQ(log.lines_with({"WARN", kRefused, "wrong job token"}).size(), 1u) << log.text();
  EXPECT_EQ(log.lines_with({"WARN", kRefused, "bad magic"}).size(), 1u) << log.text();
  EXPECT_EQ(log.lines_with({"WARN", "refused 4 more connections [wrong job token]"}).size(), 1u)
      << log.text();
  EXPECT_EQ(log.lines_with({"WARN", "refused 2 more connections [malformed"}).size(), 1u)
      << log.text();
}

// 3,000 connections that never authenticate (a tenth of them sending garbage, re-opened when
// refused) must not keep the job's clients out: new clients connect, and one that was already
// connected keeps its connection (its WILL does not fire).
TEST(TcpStore, AFloodOfUnauthenticatedConnectionsCrowdsOutNoClient) {
  constexpr int kHeld = 3000;
  TcpStoreServer server(opts(0));
  TcpStore before_flood(opts(server.port())), watcher(opts(server.port()));
  EXPECT_TRUE(before_flood.set_when_gone("gone/before", bytes("1")));
  StderrCapture log;
  std::atomic<bool> stop{false};
  std::atomic<int> opened{0};
  std::thread flood([&] {
    std::vector<std::unique_ptr<Raw>> held;
    for (int i = 0; !stop.load(); ++i) {
      auto r = std::make_unique<Raw>(server.port());
      if (i % 10 == 0) r->send(bytes("\x01garbage"));
      held.push_back(std::move(r));
      ++opened;
      if (held.size() >= size_t(kHeld)) held.erase(held.begin());  // re-open the oldest
    }
  });
  while (opened.load() < kHeld) std::this_thread::sleep_for(10ms);
  const auto t0 = Clock::now();
  for (int i = 0; i < 20; ++i) {
    TcpStore c(opts(server.port()));
    c.set("k" + std::to_string(i), bytes("v"));
    EXPECT_EQ(c.add("clients", 1), i + 1);
  }
  const auto took = since(t0);
  EXPECT_EQ(before_flood.get("k19", 1s), bytes("v"));
  stop = true;
  flood.join();
  EXPECT_LT(took, 10s);
  EXPECT_GT(opened.load(), kHeld);
  EXPECT_GT(server.rejected_connections(), 0u);  // the flood's oldest were crowded out
  error_of(ErrorCode::timeout, [&] { watcher.get("gone/before", 100ms); });
  if (warnings_logged()) {
    EXPECT_LE(log.lines_with({"WARN", kRefused}).size(), 2u) << log.text();
    EXPECT_EQ(log.lines_with({"WARN", kRefused, "[too many unauthenticated"}).size(), 1u)
        << log.text().substr(0, 4000);
  }
}
