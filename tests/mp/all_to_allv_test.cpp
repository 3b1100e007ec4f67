// all_to_allv on whatever path the group takes (the shared segment on one node, pairwise over
// the network with STRATA_SHM=0 or across nodes): the patterns a router makes (zeros, all to one,
// one to all, Zipf skew spanning many staging rounds), gaps and reversed displacements, checked
// element by element against data each receiver derives from the sender, the destination and the
// index alone.
#include <algorithm>
#include <cmath>
#include <functional>

#include "tests/mp/mp.hpp"

using namespace strata;

namespace {

// Elements rank `from` sends rank `to`.
using Pattern = std::function<size_t(int from, int to, int n)>;

// Sizes a router over n experts makes: expert j draws (j + 1)^-s of every sender's `tokens`.
size_t zipf(int to, int n, size_t tokens, double s) {
  double total = 0;
  for (int j = 0; j < n; ++j) total += std::pow(j + 1, -s);
  return size_t(double(tokens) * std::pow(to + 1, -s) / total);
}

// Runs `p` with blocks laid out in reverse rank order, `gap` unused elements between them (which
// must keep their values), and checks every received element and every gap.
void check(DataType dt, const Pattern& p, size_t gap, int salt) {
  auto& w = mp::world();
  const int n = w.size(), me = w.rank();
  const size_t es = dtype_size(dt);
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t in_len = 0, out_len = 0;
  for (int j = n - 1; j >= 0; --j) {
    sc[j] = p(me, j, n), sd[j] = in_len, in_len += sc[j] + gap;
    rc[j] = p(j, me, n), rd[j] = out_len, out_len += rc[j] + gap;
  }
  std::vector<uint8_t> in(in_len * es), out(out_len * es, 0xA5), want(out_len * es, 0xA5);
  for (int j = 0; j < n; ++j) {
    mp::fill(in.data() + sd[j] * es, dt, sc[j], me, 0, salt + j);
    mp::fill(want.data() + rd[j] * es, dt, rc[j], j, 0, salt + me);
  }
  w.all_to_allv(mp::view(in, dt), sc, sd, mp::view(out, dt), rc, rd).wait();
  const std::string bad = mp::compare(out.data(), want.data(), DataType::u8, out.size());
  EXPECT_EQ(bad, "") << "rank " << me << ", " << dtype_name(dt) << ", " << out_len
                     << " elements received (gaps of " << gap << ")";
}

}  // namespace

TEST(Collectives, AllToAllvRouterPatterns) {
  const std::vector<std::pair<const char*, Pattern>> patterns = {
      {"nothing", [](int, int, int) { return size_t(0); }},
      {"to itself only", [](int f, int t, int) { return f == t ? size_t(5) : 0; }},
      {"all to rank 0", [](int, int t, int) { return t == 0 ? size_t(1000) : 0; }},
      {"rank 0 to all", [](int f, int t, int) { return f == 0 ? size_t(300 + 7 * t) : 0; }},
      {"one pair", [](int f, int t, int n) { return f == n - 1 && t == 0 ? size_t(33) : 0; }},
      {"uneven", [](int f, int t, int) { return size_t((f * 7 + t * 3) % 5 * 111); }},
      {"zipf 1.2, 4 Mi elements", [](int, int t, int n) { return zipf(t, n, 4 << 20, 1.2); }},
      {"zipf 3, 1 Mi elements", [](int, int t, int n) { return zipf(t, n, 1 << 20, 3.0); }},
  };
  int salt = 0;
  for (const auto& [name, p] : patterns) {
    SCOPED_TRACE(name);
    for (size_t gap : {size_t(0), size_t(3)}) check(DataType::f32, p, gap, salt++);
  }
}

TEST(Collectives, AllToAllvEveryDtype) {
  for (DataType dt : mp::all_dtypes()) {
    check(
        dt, [](int f, int t, int) { return size_t((f + 2 * t) % 3 * 4099 + 1); }, 1, 7);
  }
}

// Calls of different shapes back to back: the segment's rounds advance through its staging
// buffers differently each time, and no call may read another's.
TEST(Collectives, AllToAllvBackToBack) {
  for (int i = 0; i < 12; ++i) {
    const size_t scale = size_t(1) << (i % 4 * 5);  // 1, 32, 1 Ki, 32 Ki elements
    check(
        DataType::i32,
        [&](int f, int t, int) { return (f + t + i) % 3 == 0 ? 0 : scale * size_t(1 + t); }, 0,
        100 + i);
  }
}
