// The TCP store: semantics (binary values, blocking GET and WAIT, atomic ADD, prefixes), deadlines
// and reconnection, and hostile input (wrong token, garbage, truncated, oversized and half-sent
// frames, silence, a fuzz loop) that must close only the offending connection, be counted and
// logged, and never stop the server answering good clients.
#include "strata/store.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include "base/log.hpp"
#include "store/refusal_log.hpp"
#include "store/wire.hpp"
#include "strata/error.hpp"

using namespace strata;
using namespace std::chrono_literals;
using std::chrono::milliseconds;

namespace {

const std::string kToken = "s3cret-job-token";

TcpStoreOptions opts(uint16_t port, const std::string& token = kToken) {
  TcpStoreOptions o;
  o.port = port;
  o.token = token;
  o.connect_timeout = 5s;
  return o;
}

Bytes bytes(std::string_view s) { return Bytes(s.begin(), s.end()); }

milliseconds since(Clock::time_point t0) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t0);
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/// Polls `pred` until it holds or `limit` passes.
template <typename F>
bool eventually(F pred, milliseconds limit = 5s) {
  const auto until = Clock::now() + limit;
  while (!pred()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

/// Runs `f`, expects a strata::Error with `code`, and returns its message.
template <typename F>
std::string error_of(ErrorCode code, F f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(int(e.code()), int(code)) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no strata::Error thrown";
  return "";
}

// Frames built by hand rather than with store::encode, so the documented layout is tested too.
void put_le(std::vector<uint8_t>& b, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b.push_back(uint8_t(v >> (8 * i)));
}
std::vector<uint8_t> header(uint32_t magic, uint16_t version, uint16_t type, uint32_t length) {
  std::vector<uint8_t> h;
  put_le(h, magic, 4);
  put_le(h, version, 2);
  put_le(h, type, 2);
  put_le(h, length, 4);
  return h;
}
std::vector<uint8_t> operator+(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
std::vector<uint8_t> frame(store::Type t, const std::vector<uint8_t>& payload) {
  return header(store::kMagic, store::kVersion, uint16_t(t), uint32_t(payload.size())) + payload;
}
std::vector<uint8_t> key_field(const std::string& k) {
  std::vector<uint8_t> b;
  put_le(b, k.size(), 4);
  return b + bytes(k);
}
std::vector<uint8_t> hello_frame(const std::string& token = kToken) {
  return frame(store::Type::hello, bytes(token));
}
std::vector<uint8_t> set_frame(const std::string& k, const Bytes& v) {
  std::vector<uint8_t> len;
  put_le(len, v.size(), 4);
  return frame(store::Type::set, key_field(k) + len + v);
}
std::vector<uint8_t> get_frame(const std::string& k, uint32_t timeout_ms = 60000) {
  std::vector<uint8_t> t;
  put_le(t, timeout_ms, 4);
  return frame(store::Type::get, key_field(k) + t);
}
std::vector<uint8_t> add_frame(const std::string& k, int64_t d) {
  std::vector<uint8_t> delta;
  put_le(delta, uint64_t(d), 8);
  return frame(store::Type::add, key_field(k) + delta);
}
std::vector<uint8_t> wait_frame(const std::vector<std::string>& keys) {
  std::vector<uint8_t> p;
  put_le(p, 60000, 4);  // timeout in ms
  put_le(p, keys.size(), 4);
  for (const auto& k : keys) p = p + key_field(k);
  return frame(store::Type::wait, p);
}
const std::vector<uint8_t> kOkFrame = header(store::kMagic, store::kVersion, 16, 0);

/// A plain TCP connection to the store, for sending arbitrary bytes.
class Raw {
 public:
  explicit Raw(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    EXPECT_TRUE(ok_) << std::strerror(errno);
  }
  ~Raw() { ::close(fd_); }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;
  bool connected() const { return ok_; }

  /// Sends everything; errors are ignored (the server may already have closed).
  void send(const std::vector<uint8_t>& b) {
    size_t done = 0;
    while (done < b.size()) {
      ssize_t n = ::send(fd_, b.data() + done, b.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return;
      done += size_t(n);
    }
  }
  /// Reads exactly `n` bytes within `limit`, or nullopt.
  std::optional<std::vector<uint8_t>> read(size_t n, milliseconds limit = 2s) {
    std::vector<uint8_t> b(n);
    size_t got = 0;
    const auto until = Clock::now() + limit;
    while (got < n) {
      if (!readable_before(until)) return std::nullopt;
      ssize_t k = ::recv(fd_, b.data() + got, n - got, MSG_DONTWAIT);
      if (k <= 0 && !(k < 0 && errno == EAGAIN)) return std::nullopt;
      if (k > 0) got += size_t(k);
    }
    return b;
  }
  /// True if the server closes the connection within `limit`; anything it sends first is
  /// read and dropped.
  bool closed_within(milliseconds limit) {
    const auto until = Clock::now() + limit;
    uint8_t buf[4096];
    for (;;) {
      if (!readable_before(until)) return false;
      ssize_t k = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
      if (k == 0 || (k < 0 && errno == ECONNRESET)) return true;
    }
  }

 private:
  bool readable_before(Clock::time_point until) {
    const auto left = std::chrono::ceil<milliseconds>(until - Clock::now()).count();
    if (left < 0) return false;
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, int(left)) > 0;
  }
  int fd_ = -1;
  bool ok_ = false;
};

/// Sends this process's stderr (where the server logs) to a temporary file while it lives.
class StderrCapture {
 public:
  StderrCapture() {
    std::fflush(stderr);
    file_ = std::tmpfile();
    saved_ = ::dup(2);
    ::dup2(::fileno(file_), 2);
  }
  ~StderrCapture() {
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    if (::testing::Test::HasFailure()) {  // show what the server said
      const std::string t = text();
      std::fprintf(stderr, "--- captured log (last 8 KiB) ---\n%s\n",
                   t.substr(t.size() > 8192 ? t.size() - 8192 : 0).c_str());
    }
    std::fclose(file_);
  }
  std::string text() const {
    std::string s;
    char buf[65536];
    off_t at = 0;
    for (ssize_t n; (n = ::pread(::fileno(file_), buf, sizeof buf, at)) > 0; at += n) {
      s.append(buf, size_t(n));
    }
    return s;
  }
  /// The lines that contain every one of `parts`.
  std::vector<std::string> lines_with(std::initializer_list<std::string> parts) const {
    std::vector<std::string> found;
    std::istringstream in(text());
    for (std::string line; std::getline(in, line);) {
      bool all = true;
      for (const auto& p : parts) all = all && contains(line, p);
      if (all) found.push_back(line);
    }
    return found;
  }

 private:
  FILE* file_ = nullptr;
  int saved_ = -1;
};

bool warnings_logged() { return log::enabled(log::Level::WARN); }

const std::string kRefused = "refused connection from 127.0.0.1:";

}  // namespace

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

// Each case on a server of its own, so that its refusal is the first of its cause and logged.
TEST(TcpStore, MalformedFramesCloseOnlyThatConnection) {
  const auto hello = hello_frame();
  std::vector<uint8_t> four_bytes;
  put_le(four_bytes, 1000, 4);
  struct Case {
    const char* name;
    std::vector<uint8_t> data;
    const char* reason;  // in the log line
  };
  const std::vector<Case> cases = {
      {"http garbage", bytes("GET / HTTP/1.1\r\nHost: store\r\n\r\n"), "bad magic"},
      {"bad magic", header(0xdeadbeef, 1, 1, 0), "bad magic 0xdeadbeef"},
      {"bad version", header(store::kMagic, 7, 1, uint32_t(kToken.size())) + bytes(kToken),
       "protocol version 7"},
      {"unknown type", header(store::kMagic, store::kVersion, 99, 0), "unknown message type 99"},
      {"oversized HELLO", header(store::kMagic, store::kVersion, 1, 1u << 20), "over its limit"},
      {"oversized SET", hello + header(store::kMagic, store::kVersion, 2, 0xffffffffu),
       "over its limit"},
      {"oversized GET", hello + header(store::kMagic, store::kVersion, 3, 5000), "over its limit"},
      {"request before HELLO", get_frame("a"), "GET before HELLO"},
      {"reply type from a client", hello + frame(store::Type::ok, {}), "unexpected OK"},
      {"second HELLO", hello + hello, "unexpected HELLO"},
      {"key length past the end", hello + frame(store::Type::set, {200, 0, 0, 0, 'k'}),
       "malformed SET payload of 5 bytes"},
      {"trailing bytes", hello + frame(store::Type::get, key_field("a") + Bytes{0, 0, 0, 0, 0}),
       "malformed GET"},
      {"key over 4 KiB",
       hello + frame(store::Type::set, key_field(std::string(4097, 'k')) + Bytes(4, 0)),
       "malformed SET payload of 4105 bytes"},
      {"WAIT count past the end", hello + frame(store::Type::wait, four_bytes + four_bytes),
       "malformed WAIT"},
      {"ADD without its delta", hello + frame(store::Type::add, key_field("a")), "malformed ADD"},
  };
  StderrCapture log;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    TcpStoreServer server(opts(0));
    TcpStore good(opts(server.port()));
    const uint64_t before = server.rejected_connections();
    const size_t logged_before = log.text().size();
    Raw r(server.port());
    r.send(c.data);
    EXPECT_TRUE(r.closed_within(3s));
    EXPECT_TRUE(eventually([&] { return server.rejected_connections() == before + 1; }));
    good.set(c.name, bytes(c.name));
    EXPECT_EQ(good.get(c.name, 2s), bytes(c.name));
    if (warnings_logged()) {  // exactly one line, naming the peer and the reason
      const std::string line = log.text().substr(logged_before);
      EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << line;
      EXPECT_TRUE(contains(line, "WARN") && contains(line, kRefused) && contains(line, c.reason))
          << line;
    }
  }
  if (warnings_logged()) {
    EXPECT_EQ(log.lines_with({"WARN"}).size(), cases.size());
  }
}

TEST(TcpStore, AFrameCutShortByACloseIsCounted) {
  TcpStoreServer server(opts(0));
  TcpStore good(opts(server.port()));
  StderrCapture log;
  const auto hello = hello_frame();
  const auto set = set_frame("k", Bytes(100, 7));
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    const uint64_t before = server.rejected_connections();
    {
      Raw r(server.port());
      if (variant == 0) r.send({hello.begin(), hello.begin() + 5});  // part of a header
      if (variant == 1) r.send({hello.begin(), hello.end() - 3});    // part of a payload
      if (variant == 2) {  // authenticated, then half a SET
        r.send(hello);
        EXPECT_EQ(r.read(kOkFrame.size()), kOkFrame);
        r.send({set.begin(), set.begin() + 40});
      }
    }  // closed here
    EXPECT_TRUE(eventually([&] { return server.rejected_connections() == before + 1; }));
    good.set("k", bytes("v"));
    EXPECT_EQ(good.get("k", 2s), bytes("v"));
  }
  if (warnings_logged()) {
    // The first is logged, the others counted (RefusalsAreLoggedOncePerCauseWithACount).
    EXPECT_EQ(log.lines_with({"WARN", kRefused, "middle of a frame"}).size(), 1u) << log.text();
  }
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

// 10,000 malformed messages and connection attempts, one connection each (a malformed message
// ends its connection). Each kind is built to be refused for certain, so the count is exact.
TEST(TcpStore, FuzzTenThousandMalformedMessages) {
  constexpr int kMessages = 10000;
  TcpStoreServer server(opts(0));
  TcpStore good(opts(server.port()));
  good.set("fuzz/present", bytes("value"));
  const auto value_reply = header(store::kMagic, store::kVersion, 17, 5) + bytes("value");
  StderrCapture log;
  std::mt19937_64 rng(20240611);
  auto below = [&](uint64_t n) { return size_t(rng() % n); };
  auto noise = [&](size_t n) {
    std::vector<uint8_t> b(n);
    for (auto& x : b) x = uint8_t(rng());
    return b;
  };
  std::map<std::string, Bytes> expected_sets;
  int64_t expected_counter = 0;
  // A well-formed request that never parks (its keys exist). `served`: the server will carry it
  // out, so the final state must show it.
  auto valid_request = [&](bool served) {
    switch (below(4)) {
      case 0: {
        const std::string k = "fuzz/set/" + std::to_string(below(50));
        Bytes v = noise(below(32));
        if (served) expected_sets[k] = v;
        return set_frame(k, v);
      }
      case 1:
        return get_frame("fuzz/present");
      case 2:
        expected_counter += served;
        return add_frame("fuzz/counter", 1);
      default:
        return wait_frame({"fuzz/present", "fuzz/present"});
    }
  };
  auto fix_length = [](std::vector<uint8_t>& f) {
    const uint64_t n = f.size() - store::kHeaderBytes;
    for (int i = 0; i < 4; ++i) f[8 + i] = uint8_t(n >> (8 * i));
  };
  // A valid request made malformed: its payload cut short, padded, or its first length field
  // (key length, or WAIT's key count) made larger than the rest of the payload.
  auto corrupt = [&](std::vector<uint8_t> f) {
    const size_t payload = f.size() - store::kHeaderBytes;
    switch (below(3)) {
      case 0:
        f.resize(f.size() - 1 - below(payload));
        fix_length(f);
        break;
      case 1:
        f = f + noise(1 + below(8));
        fix_length(f);
        break;
      default: {  // WAIT's first field is its timeout, its key count the second
        const size_t at = f[6] == uint8_t(store::Type::wait) ? 16 : 12;
        const uint32_t lie = uint32_t(payload + 1 + below(100000));
        for (int i = 0; i < 4; ++i) f[at + i] = uint8_t(lie >> (8 * i));
      }
    }
    return f;
  };
  auto bad_header = [&]() {
    const uint16_t good_types[] = {1, 2, 3, 4, 5, 6, 16, 17, 18, 19, 20};
    uint32_t magic = store::kMagic;
    uint16_t version = store::kVersion, type = good_types[below(11)];
    uint32_t length = 0;
    switch (below(4)) {
      case 0:
        magic = uint32_t(rng()) | 1;
        if (magic == store::kMagic) magic ^= 2;
        break;
      case 1:
        version = uint16_t(store::kVersion + 1 + below(65000));
        break;
      case 2:
        type = uint16_t(21 + below(65000));
        break;
      default:
        length = uint32_t(store::max_payload(store::Type(type)) + 1 +
                          below(0xffffffffu - store::max_payload(store::Type(type))));
    }
    return header(magic, version, type, length) + noise(below(16));
  };

  const uint64_t before = server.rejected_connections();
  uint64_t must_refuse = 0;
  int not_closed = 0, wrong_reply = 0, done = 0;
  const auto t0 = Clock::now();
  for (; done < kMessages && since(t0) < 18s && not_closed + wrong_reply < 20; ++done) {
    Raw r(server.port());
    if (!r.connected()) break;
    const size_t kind = below(20);
    if (kind == 0) continue;  // connect, then close at once: an attempt, not an offence
    if (kind == 1) {          // a good client among the bad
      r.send(hello_frame() + get_frame("fuzz/present"));
      if (r.read(kOkFrame.size()) != kOkFrame || r.read(value_reply.size()) != value_reply) {
        ++wrong_reply;
      }
      continue;
    }
    ++must_refuse;
    if (kind <= 3) {  // a frame cut short, then the client leaves
      if (below(2)) {
        r.send(hello_frame());
        if (r.read(kOkFrame.size()) != kOkFrame) ++wrong_reply;
        auto f = valid_request(false);
        r.send({f.begin(), f.end() - 1 - below(f.size() - 1)});
      } else {
        auto f = hello_frame();
        r.send({f.begin(), f.begin() + 1 + below(f.size() - 1)});
      }
      continue;
    }
    std::vector<uint8_t> data;
    switch (kind) {
      case 4:
      case 5: {  // noise: bad magic (the first byte is never 'S'), or too short before the close
        data = noise(1 + below(64));
        if (data[0] == 'S') data[0] = 's';
        break;
      }
      case 6:
      case 7:
        data = (below(2) ? hello_frame() : std::vector<uint8_t>{}) + bad_header();
        break;
      case 8: {
        std::string token = kToken;
        token[below(token.size())] ^= uint8_t(1 + below(255));
        data = hello_frame(below(4) ? token : std::string(below(20), 'x'));
        break;
      }
      case 9:
        data = valid_request(false);
        break;    // before HELLO
      default: {  // authenticated, a few good requests, then a malformed one
        data = hello_frame();
        for (size_t i = below(3); i > 0; --i) data = data + valid_request(true);
        data = data + corrupt(valid_request(false));
      }
    }
    r.send(data);
    if (data.size() < store::kHeaderBytes) continue;  // the close below is what ends it
    if (!r.closed_within(2s)) ++not_closed;
  }
  const auto took = since(t0);
  EXPECT_EQ(done, kMessages) << "stopped after " << took.count() << " ms";
  EXPECT_EQ(not_closed, 0);
  EXPECT_EQ(wrong_reply, 0);
  EXPECT_TRUE(eventually([&] { return server.rejected_connections() == before + must_refuse; }))
      << server.rejected_connections() - before << " refused, expected " << must_refuse;
  if (warnings_logged()) {  // one line per cause, whatever the count
    std::set<std::string> causes;
    for (const auto& line : log.lines_with({"WARN", kRefused})) {
      EXPECT_TRUE(causes.insert(line.substr(line.rfind('['))).second) << line;
    }
    EXPECT_GE(causes.size(), 3u);  // malformed, cut short, wrong token
    EXPECT_LE(causes.size(), store::kRefusals);
  }

  // The server still answers correctly.
  EXPECT_EQ(good.get("fuzz/present", 2s), bytes("value"));
  good.set("after", bytes("fuzz"));
  EXPECT_EQ(good.get("after", 2s), bytes("fuzz"));
  TcpStore fresh(opts(server.port()));
  EXPECT_EQ(fresh.get("after", 2s), bytes("fuzz"));
  EXPECT_EQ(fresh.add("fuzz/counter", 0), expected_counter);
  for (const auto& [k, v] : expected_sets) EXPECT_EQ(fresh.get(k, 2s), v) << k;
  std::printf("fuzz: %d messages in %lld ms, %llu refused\n", done, (long long)took.count(),
              (unsigned long long)must_refuse);
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

TEST(TcpStore, ClientRetriesUntilTheServerIsUpAndResolvesHostNames) {
  uint16_t port = 0;
  {
    TcpStoreServer probe(opts(0));  // find a free port, then free it again
    port = probe.port();
  }
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

TEST(TcpStore, ConnectingToNothingTimesOutNamingTheAddress) {
  uint16_t port = 0;
  {
    TcpStoreServer probe(opts(0));
    port = probe.port();
  }
  TcpStoreOptions o = opts(port);
  o.connect_timeout = 300ms;
  const auto t0 = Clock::now();
  auto msg = error_of(ErrorCode::timeout, [&] { TcpStore c(o); });
  EXPECT_GE(since(t0), 300ms);
  EXPECT_LT(since(t0), 3s);
  EXPECT_TRUE(contains(msg, "127.0.0.1:" + std::to_string(port))) << msg;
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
