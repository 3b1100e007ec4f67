// The TCP store: semantics, deadlines, and hostile input (wrong token, garbage, truncated and
// oversized frames, silent connections, a fuzz loop) that must never stop it serving good clients.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <thread>

#include "store/wire.hpp"
#include "strata/error.hpp"
#include "strata/store.hpp"

using namespace strata;
using namespace std::chrono_literals;

namespace {

TcpStoreOptions opts(uint16_t port = 0, std::string token = "secret") {
  TcpStoreOptions o;
  o.port = port;
  o.token = std::move(token);
  o.connect_timeout = 5s;
  return o;
}

Bytes bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

// A raw TCP connection for sending arbitrary bytes.
struct Raw {
  int fd;
  explicit Raw(uint16_t port) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  }
  ~Raw() { ::close(fd); }
  void send(const std::vector<uint8_t>& b) { (void)!::send(fd, b.data(), b.size(), MSG_NOSIGNAL); }
  // True when the server closed the connection within `t`.
  bool closed_within(std::chrono::milliseconds t) {
    timeval tv{0, int(std::chrono::microseconds(t).count())};
    if (t >= 1s) tv = {long(t.count() / 1000), long(t.count() % 1000) * 1000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    uint8_t buf[256];
    for (;;) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }
};

std::vector<uint8_t> frame(store::Type t, const std::vector<uint8_t>& payload) {
  store::Message m;
  m.type = t;
  m.value = payload;
  return store::encode(m);
}

}  // namespace

TEST(Store, SetGetRoundTripBinaryValues) {
  TcpStoreServer server(opts());
  TcpStore c(opts(server.port()));
  Bytes big(1 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = uint8_t(i * 7 + 3);
  Bytes zeros = {0, 0, 255, 0};
  c.set("empty", {});
  c.set("big", big);
  c.set("zeros", zeros);
  EXPECT_EQ(c.get("empty", 1s), Bytes{});
  EXPECT_EQ(c.get("big", 1s), big);
  EXPECT_EQ(c.get("zeros", 1s), zeros);
  c.set("zeros", bytes("replaced"));
  EXPECT_EQ(c.get("zeros", 1s), bytes("replaced"));
}

TEST(Store, GetWaitsForAnotherClientsSet) {
  TcpStoreServer server(opts());
  TcpStore a(opts(server.port())), b(opts(server.port()));
  std::thread setter([&] {
    std::this_thread::sleep_for(200ms);
    b.set("late", bytes("here"));
  });
  auto t0 = Clock::now();
  EXPECT_EQ(a.get("late", 5s), bytes("here"));
  EXPECT_GE(Clock::now() - t0, 150ms);
  setter.join();
}

TEST(Store, ConcurrentAddsFromEightClients) {
  TcpStoreServer server(opts());
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&] {
      TcpStore c(opts(server.port()));
      for (int i = 0; i < 100; ++i) c.add("counter", 1);
    });
  }
  for (auto& t : ts) t.join();
  TcpStore c(opts(server.port()));
  EXPECT_EQ(c.add("counter", 0), 800);
  EXPECT_EQ(c.add("counter", -5), 795);
}

TEST(Store, AddOnANonCounterIsAnErrorNotACrash) {
  TcpStoreServer server(opts());
  TcpStore c(opts(server.port()));
  c.set("text", bytes("hello world"));
  EXPECT_THROW(c.add("text", 1), Error);
  EXPECT_EQ(c.get("text", 1s), bytes("hello world"));
}

TEST(Store, WaitForSeveralKeys) {
  TcpStoreServer server(opts());
  TcpStore a(opts(server.port())), b(opts(server.port()));
  std::thread setter([&] {
    for (const char* k : {"k1", "k2", "k3"}) {
      std::this_thread::sleep_for(50ms);
      b.set(k, bytes(k));
    }
  });
  a.wait({"k1", "k2", "k3"}, 5s);
  EXPECT_EQ(a.get("k3", 1s), bytes("k3"));
  setter.join();
}

TEST(Store, GetTimeoutThrowsAndTheClientStaysUsable) {
  TcpStoreServer server(opts());
  TcpStore c(opts(server.port()));
  auto t0 = Clock::now();
  try {
    c.get("never", 300ms);
    FAIL() << "no timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::timeout);
    EXPECT_NE(std::string(e.what()).find("'never'"), std::string::npos) << e.what();
  }
  auto took = Clock::now() - t0;
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 3s);
  // The late reply must not confuse later calls.
  c.set("never", bytes("now"));
  EXPECT_EQ(c.get("never", 1s), bytes("now"));
  EXPECT_EQ(c.add("n", 2), 2);
}

TEST(Store, WrongTokenIsRefusedAndGoodClientsCarryOn) {
  TcpStoreServer server(opts());
  TcpStore good(opts(server.port()));
  good.set("a", bytes("1"));
  try {
    TcpStore bad(opts(server.port(), "wrong"));
    bad.get("a", 1s);
    FAIL() << "wrong token accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::peer_failure) << e.what();
  }
  EXPECT_GE(server.rejected_connections(), 1u);
  EXPECT_EQ(good.get("a", 1s), bytes("1"));
}

TEST(Store, MalformedInputClosesOnlyThatConnection) {
  TcpStoreServer server(opts());
  TcpStore good(opts(server.port()));
  {
    Raw r(server.port());
    r.send(bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));  // garbage: bad magic
    EXPECT_TRUE(r.closed_within(2s));
  }
  {
    Raw r(server.port());  // oversized length in an otherwise valid header
    auto f = frame(store::Type::hello, bytes("secret"));
    uint32_t huge = 0xfffffff0u;
    std::memcpy(f.data() + 8, &huge, 4);
    r.send(f);
    EXPECT_TRUE(r.closed_within(2s));
  }
  {
    Raw r(server.port());  // unknown type
    auto f = frame(store::Type::hello, bytes("secret"));
    f[6] = 99;
    r.send(f);
    EXPECT_TRUE(r.closed_within(2s));
  }
  {
    Raw r(server.port());  // request before HELLO
    store::Message m;
    m.type = store::Type::get;
    m.key = "a";
    r.send(store::encode(m));
    EXPECT_TRUE(r.closed_within(2s));
  }
  {
    Raw r(server.port());  // authenticated, then a SET whose payload lies about its key length
    r.send(frame(store::Type::hello, bytes("secret")));
    auto f = frame(store::Type::set, {200, 0, 0, 0, 'k'});
    r.send(f);
    EXPECT_TRUE(r.closed_within(2s));
  }
  {
    Raw r(server.port());  // truncated frame, then the client goes away
    auto f = frame(store::Type::hello, bytes("secret"));
    f.resize(f.size() - 3);
    r.send(f);
  }
  Raw silent(server.port());     // connects and says nothing
  Raw half(server.port());       // half a header, then silence
  half.send({0x53, 0x54, 0x52});
  good.set("still", bytes("alive"));
  EXPECT_EQ(good.get("still", 1s), bytes("alive"));
  EXPECT_GE(server.rejected_connections(), 5u);
}

TEST(Store, FuzzTenThousandMalformedMessages) {
  TcpStoreServer server(opts());
  TcpStore good(opts(server.port()));
  std::mt19937 rng(1234);
  const auto until = Clock::now() + 20s;
  int sent = 0;
  uint64_t must_reject = 0;
  // Several messages per connection: after HELLO, random frames (valid headers with random
  // payloads, random headers, random bytes) until the server closes it; then a new connection.
  while (sent < 10000 && Clock::now() < until) {
    Raw r(server.port());
    int kind = int(rng() % 3);
    if (kind != 2) r.send(frame(store::Type::hello, bytes(kind == 0 ? "secret" : "nope")));
    for (int i = 0; i < 20 && sent < 10000; ++i, ++sent) {
      std::vector<uint8_t> f;
      switch (rng() % 3) {
        case 0: {  // valid header, random type and payload
          std::vector<uint8_t> p(rng() % 64);
          for (auto& b : p) b = uint8_t(rng());
          f = frame(store::Type(1 + rng() % 5), p);
          break;
        }
        case 1:  // random header fields
          f.resize(store::kHeaderBytes + rng() % 16);
          for (auto& b : f) b = uint8_t(rng());
          break;
        default:  // noise
          f.resize(1 + rng() % 40);
          for (auto& b : f) b = uint8_t(rng());
      }
      r.send(f);
    }
    // A wrong token or a first frame that is not HELLO must get the connection closed.
    if (kind != 0) {
      EXPECT_TRUE(r.closed_within(2s)) << "connection kind " << kind;
      ++must_reject;
    }
  }
  EXPECT_EQ(sent, 10000) << "fuzz loop ran out of time";
  good.set("after", bytes("fuzz"));
  EXPECT_EQ(good.get("after", 2s), bytes("fuzz"));
  EXPECT_EQ(good.add("c", 3), 3);
  EXPECT_GE(server.rejected_connections(), must_reject);
  EXPECT_GT(must_reject, 100u);
}

TEST(Store, PrefixStoreIsolatesNamespaces) {
  TcpStoreServer server(opts());
  auto base = std::make_shared<TcpStore>(opts(server.port()));
  PrefixStore a(base, "a"), b(base, "b");
  a.set("k", bytes("from a"));
  b.set("k", bytes("from b"));
  EXPECT_EQ(a.get("k", 1s), bytes("from a"));
  EXPECT_EQ(b.get("k", 1s), bytes("from b"));
  EXPECT_EQ(base->get("a/k", 1s), bytes("from a"));
  EXPECT_EQ(a.add("n", 1), 1);
  EXPECT_EQ(b.add("n", 5), 5);
  EXPECT_THROW(a.wait({"missing"}, 100ms), Error);
}

TEST(Store, ConnectToNothingTimesOutWithTheAddress) {
  TcpStoreServer server(opts());
  uint16_t port = server.port();
  TcpStoreOptions o = opts(port == 65535 ? 1 : port + 1);
  o.connect_timeout = 300ms;
  try {
    TcpStore c(o);
    FAIL() << "connected to nothing";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::timeout);
    EXPECT_NE(std::string(e.what()).find("127.0.0.1"), std::string::npos) << e.what();
  }
}
