// Point-to-point: ring exchange, tag matching order, many outstanding, receives from any source,
// and a message larger than 2^31 bytes.
#include "mp.hpp"

using namespace strata;

TEST(PointToPoint, RingExchangeBothDirections) {
  auto& w = mp::world();
  const int n = w.size(), me = w.rank();
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  std::vector<int64_t> to_right(1000), to_left(1000), from_left(1000, -1), from_right(1000, -1);
  for (int i = 0; i < 1000; ++i) {
    to_right[i] = me * 100000 + i;
    to_left[i] = -(me * 100000 + i);
  }
  // Post all four at once: completion must not depend on the order they were issued in.
  Work a = w.send(buffer(to_right), right, 1);
  Work b = w.send(buffer(to_left), left, 2);
  Work c = w.recv(buffer(from_left), left, 1);
  Work d = w.recv(buffer(from_right), right, 2);
  for (Work* x : {&a, &b, &c, &d}) x->wait();
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(from_left[i], left * 100000 + i);
    ASSERT_EQ(from_right[i], -(right * 100000 + i));
  }
}

// send_recv: a ring in which every rank sends before it receives, one batch per rank, and a
// batch with a bad op refused whole before anything moves.
TEST(PointToPoint, SendRecvBatchRing) {
  auto& w = mp::world();
  const int n = w.size(), me = w.rank();
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  const size_t count = size_t(1) << 20;  // 4 MiB: past any eager size
  std::vector<int32_t> out(count), in(count, -1);
  for (size_t i = 0; i < count; ++i) out[i] = int32_t(me * 7919 + int64_t(i) % 100003);
  std::vector<Work> works =
      w.send_recv({{PeerOp::send, buffer(out), right, 3}, {PeerOp::recv, buffer(in), left, 3}});
  ASSERT_EQ(works.size(), 2u);
  for (Work& x : works) x.wait();
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(in[i], int32_t(left * 7919 + int64_t(i) % 100003)) << "element " << i;
  }
  // The second op names a rank out of range: refused, and the first was not issued either (the
  // ring after it matches its own messages only).
  std::vector<int32_t> stray = {42};
  mp::expect_error(
      [&] {
        w.send_recv({{PeerOp::send, buffer(stray), right, 4}, {PeerOp::recv, buffer(in), n, 4}});
      },
      ErrorCode::invalid_argument, {"recv", "peer"});
  std::vector<int32_t> mine = {me}, theirs = {-1};
  for (Work& x : w.send_recv(
           {{PeerOp::send, buffer(mine), right, 4}, {PeerOp::recv, buffer(theirs), left, 4}})) {
    x.wait();
  }
  EXPECT_EQ(theirs[0], left) << "a refused batch sent its first op";
  w.barrier().wait();
}

TEST(PointToPoint, SameTagMatchesInIssueOrder) {
  auto& w = mp::world();
  if (w.size() < 2) GTEST_SKIP() << "needs a peer (world size 1)";
  const int k = 50;
  if (w.rank() == 0) {
    std::vector<std::vector<int32_t>> msgs(k);
    std::vector<Work> ws;
    for (int i = 0; i < k; ++i) {
      msgs[i].assign(size_t(i) * 37 + 1, i);
      ws.push_back(w.send(buffer(msgs[i]), 1, 7));
    }
    for (auto& x : ws) x.wait();
  } else if (w.rank() == 1) {
    std::vector<std::vector<int32_t>> msgs(k);
    std::vector<Work> ws;
    for (int i = 0; i < k; ++i) {
      msgs[i].assign(size_t(i) * 37 + 1, -1);
      ws.push_back(w.recv(buffer(msgs[i]), 0, 7));
    }
    for (int i = 0; i < k; ++i) {
      ws[i].wait();
      for (int32_t v : msgs[i]) ASSERT_EQ(v, i) << "message " << i;
    }
  }
  w.barrier().wait();
}

TEST(PointToPoint, ZeroBytesAndSelf) {
  auto& w = mp::world();
  std::vector<float> none;
  std::vector<float> out(3), in = {1, 2, 3};
  Work r = w.recv(buffer(out), w.rank(), 9);
  Work s = w.send(buffer(in), w.rank(), 9);
  Work r0 = w.recv(buffer(none), w.rank(), 10);
  Work s0 = w.send(buffer(none), w.rank(), 10);
  for (Work* x : {&r, &s, &r0, &s0}) x->wait();
  EXPECT_EQ(out, in);
}

TEST(PointToPoint, AnySourceMatchesEachSenderOnceWithItsTagOnly) {
  auto& w = mp::world();
  const int n = w.size(), me = w.rank();
  if (n < 2) GTEST_SKIP() << "needs a peer (world size 1)";
  constexpr size_t kCount = 257;
  if (me == 0) {
    // Two any-source receives per sender, posted before anything was sent, with a collective
    // and a message of another tag crossing them: neither may be taken for them.
    std::vector<std::vector<int32_t>> got(2 * size_t(n - 1), std::vector<int32_t>(kCount, -1));
    std::vector<Work> any;
    for (auto& g : got) any.push_back(w.recv(buffer(g), kAnySource, 5));
    std::vector<int32_t> other(kCount, -1);
    Work from1 = w.recv(buffer(other), 1, 6);
    std::vector<float> x = {1.f};
    w.all_reduce(buffer(x), ReduceOp::sum).wait();
    EXPECT_EQ(x[0], float(n));
    from1.wait();
    EXPECT_EQ(from1.source(), 1);
    for (int32_t v : other) ASSERT_EQ(v, -6);
    std::vector<int> seen(size_t(n), 0);
    for (size_t i = 0; i < got.size(); ++i) {
      any[i].wait();
      const int src = any[i].source();
      ASSERT_GE(src, 1) << "receive " << i;
      ASSERT_LT(src, n) << "receive " << i;
      // A sender's two messages arrive in the order it sent them: first +src, then +100*src.
      const int32_t expect = seen[size_t(src)]++ == 0 ? src : 100 * src;
      for (size_t k = 0; k < kCount; ++k) ASSERT_EQ(got[i][k], expect) << "receive " << i;
    }
    for (int r = 1; r < n; ++r) EXPECT_EQ(seen[size_t(r)], 2) << "from rank " << r;
  } else {
    std::vector<int32_t> first(kCount, me), second(kCount, 100 * me), other(kCount, -6);
    if (me == 1) w.send(buffer(other), 0, 6).wait();  // sent first, under another tag
    std::vector<float> x = {1.f};
    w.all_reduce(buffer(x), ReduceOp::sum).wait();
    Work a = w.send(buffer(first), 0, 5), b = w.send(buffer(second), 0, 5);
    a.wait();
    b.wait();
    EXPECT_EQ(a.source(), -1);  // only receives have a source
  }
  w.barrier().wait();
}

TEST(PointToPoint, MessageLargerThan2GiB) {
  auto& w = mp::world();
  if (w.size() != 2) GTEST_SKIP() << "runs at world size 2 only (2.1 GiB buffers per rank)";
  const size_t bytes = (size_t(1) << 31) + 4097;
  std::vector<uint8_t> buf(bytes);
  if (w.rank() == 0) {
    for (size_t i = 0; i < bytes; ++i) buf[i] = uint8_t(i * 131 + (i >> 20));
    w.send(buffer(buf), 1).wait();
  } else {
    w.recv(buffer(buf), 0).wait();
    for (size_t i = 0; i < bytes; ++i) {
      if (buf[i] != uint8_t(i * 131 + (i >> 20))) {
        FAIL() << "byte " << i << " differs";
        break;
      }
    }
  }
  // And a collective of the same size: broadcast from rank 1 back to rank 0.
  if (w.rank() == 1) std::fill(buf.begin(), buf.end(), uint8_t(0x5a));
  w.broadcast(buffer(buf), 1).wait();
  EXPECT_EQ(std::count(buf.begin(), buf.end(), uint8_t(0x5a)), std::ptrdiff_t(bytes));
}
