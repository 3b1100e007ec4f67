// How a TCP store client connects: retries until the server is up, through a handshake closed
// unanswered, past a socket connected to itself, and a deadline naming the address or the
// caller's cancellation.
#include "bootstrap/await_rank.hpp"
#include "bootstrap/job_store.hpp"
#include "tests/store/store_helpers.hpp"

using namespace store_test;

TEST(TcpStore, ClientRetriesUntilTheServerIsUpAndResolvesHostNames) {
  const uint16_t port = unused_port();
  TcpStoreOptions o = opts(port);
  o.host = "localhost";
  auto client = std::async(std::launch::async, [&] {
    TcpStore c(o);
    c.set("hi", bytes("there"));
  });
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(client.wait_for(0s), std::future_status::timeout);  // still trying
  TcpStoreOptions so = opts(port);
  so.host = "localhost";
  TcpStoreServer server(so);
  ASSERT_EQ(client.wait_for(5s), std::future_status::ready);
  client.get();
  EXPECT_EQ(TcpStore(opts(port)).get("hi", 1s), bytes("there"));
}

// A listener that closes each connection unanswered is what a flood's crowding-out looks like to
// a client: it retries until its deadline, then names what happened; and it gets through once a
// store listens there.
TEST(TcpStore, AHandshakeClosedWithoutAnAnswerIsRetried) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  int one = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ASSERT_EQ(::listen(listener, 16), 0);
  const uint16_t port = ntohs(a.sin_port);
  std::atomic<int> closed{0};
  std::thread closer([&] {  // accepts and closes until the listener is shut down
    for (;;) {
      const int fd = ::accept(listener, nullptr, nullptr);
      if (fd < 0) return;
      ::close(fd);
      ++closed;
    }
  });

  TcpStoreOptions o = opts(port);
  o.connect_timeout = 400ms;
  const auto t0 = Clock::now();
  auto msg = error_of(ErrorCode::timeout, [&] { TcpStore c(o); });
  EXPECT_GE(since(t0), 400ms);
  EXPECT_GE(closed.load(), 2);  // it tried again
  EXPECT_TRUE(contains(msg, "closed the connection during the handshake")) << msg;
  EXPECT_TRUE(contains(msg, "127.0.0.1:" + std::to_string(port))) << msg;

  o.connect_timeout = 20s;
  auto client = std::async(std::launch::async, [&] {
    TcpStore c(o);
    c.set("hi", bytes("there"));
  });
  const int before = closed.load();
  ASSERT_TRUE(eventually([&] { return closed.load() > before; }));
  ::shutdown(listener, SHUT_RDWR);  // wakes accept()
  closer.join();
  ::close(listener);
  TcpStoreServer server(opts(port));
  ASSERT_EQ(client.wait_for(10s), std::future_status::ready);
  client.get();
  EXPECT_EQ(TcpStore(opts(port)).get("hi", 1s), bytes("there"));
}

// A client whose ephemeral port equals the server's port, connecting before the server
// listens, is connected to itself by TCP's simultaneous open; the client must see that and
// retry rather than read its own HELLO back as the reply ("malformed reply", seen in CI).
TEST(TcpStore, ASocketConnectedToItselfIsRecognised) {
  const int self = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(self, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(self, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(self, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ASSERT_EQ(::connect(self, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  EXPECT_TRUE(store::connected_to_itself(self));
  ::close(self);

  TcpStoreServer server(opts(0));  // an ordinary connection is not
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  a.sin_port = htons(server.port());
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  EXPECT_FALSE(store::connected_to_itself(fd));
  ::close(fd);
}

TEST(TcpStore, ConnectingToNothingTimesOutNamingTheAddress) {
  const uint16_t port = unused_port();
  TcpStoreOptions o = opts(port);
  o.connect_timeout = 300ms;
  const auto t0 = Clock::now();
  auto msg = error_of(ErrorCode::timeout, [&] { TcpStore c(o); });
  EXPECT_GE(since(t0), 300ms);
  EXPECT_LT(since(t0), 3s);
  EXPECT_TRUE(contains(msg, "127.0.0.1:" + std::to_string(port))) << msg;
}

// A caller that can give up (a Ctrl-C in Python's from_env) ends the wait for a server that is
// not up: at the next attempt after it says so, far inside the deadline.
TEST(TcpStore, ACancelledConnectionEndsBeforeItsDeadline) {
  const uint16_t port = unused_port();
  TcpStoreOptions o = opts(port);
  o.connect_timeout = 20s;
  const auto t0 = Clock::now();
  o.cancelled = [&] { return since(t0) > 300ms; };
  auto msg = error_of(ErrorCode::aborted, [&] { TcpStore c(o); });
  EXPECT_GE(since(t0), 300ms);
  EXPECT_LT(since(t0), 3s);
  EXPECT_TRUE(contains(msg, "cancelled") && contains(msg, std::to_string(port))) << msg;
}

// A rank whose setup failed asks the store who failed first (bootstrap::reported_failure). When
// the store rank 0 served is gone, rank 0 died, and it is the culprit whatever peer this rank
// saw fail (kill_test caught rank 2 naming rank 1, which had seen rank 0 die and exited); a
// store served outside the job names nobody, and the rank keeps its own finding.
TEST(JobStore, AGoneStoreNamesTheRankThatServedIt) {
  const ErrorContext where{.rank = 2, .group = "world", .op = "barrier", .peer = 1};
  for (const bool outside : {false, true}) {
    SCOPED_TRACE(outside ? "served outside the job" : "served by rank 0");
    auto server = std::make_unique<TcpStoreServer>(opts(0));
    auto store = bootstrap::make_job_store(nullptr, opts(server->port()), outside);
    EXPECT_FALSE(bootstrap::reported_failure(*store, where).has_value());  // nobody reported
    server.reset();
    const auto report = bootstrap::reported_failure(*store, where);
    if (outside) {
      EXPECT_FALSE(report.has_value());
      continue;
    }
    ASSERT_TRUE(report.has_value());
    EXPECT_EQ(report->code(), ErrorCode::peer_failure);
    EXPECT_EQ(report->where().peer, 0);
    EXPECT_EQ(report->where().rank, 2);
    EXPECT_EQ(report->where().op, "barrier");
    EXPECT_TRUE(contains(report->what(), "served by rank 0, is gone")) << report->what();
  }
}
