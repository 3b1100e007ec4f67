// The TCP store under malformed frames (garbage, truncated, oversized, cut short, a fuzz loop):
// each closes only its connection, is counted exactly, and the server answers good clients.
#include "tests/store/store_helpers.hpp"

using namespace store_test;

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
