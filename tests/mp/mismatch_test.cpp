// Ranks that call different collectives (count, dtype, reduction, root or the operation itself)
// all fail with both calls named, instead of hanging or corrupting. By default the shared-memory
// path checks everything (the call travels with every staged chunk); the network path
// (mp_mismatch_net_*, with STRATA_SHM=0) the kind, dtype, reduction and size of every message,
// and the whole call when a wait blocks for a second or a message goes untaken (a broadcast each
// of whose ranks believes itself the root completes, and the group fails on a later call); the
// mp_check_* tests set STRATA_CHECK=1, the full exchange.
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <regex>
#include <thread>

#include "mp.hpp"

using namespace strata;

namespace {

bool checking() {
  const char* v = std::getenv("STRATA_CHECK");
  return v && std::string(v) != "0";
}

// The group meets in a shared segment, whose mismatch check is always on.
bool on_shared_memory() {
  const char* shm = std::getenv("STRATA_SHM");
  return std::getenv("STRATA_TEST_RANKS_PER_NODE") == nullptr && !(shm && std::string(shm) == "0");
}

// all_to_allv across nodes of equal size (two or more ranks each) takes the hierarchical
// exchange, whose counts travel ahead of the blocks (tests/cluster.cmake runs it).
bool all_to_allv_hierarchical() {
  const char* per_node = std::getenv("STRATA_TEST_RANKS_PER_NODE");
  const int k = per_node ? std::atoi(per_node) : 0, n = mp::world().size();
  return k > 1 && n > k && n % k == 0 && std::getenv("STRATA_ALGO") == nullptr;
}

// The network path's check without STRATA_CHECK: message tags carry a call's kind, dtype and
// reduction, not its count (a rank names only its own, unless the peer was asked for its call).
bool network_check_only() { return !checking() && !on_shared_memory(); }

// `e` is the mismatch of `on_rank0` against `on_others` (on the network path without their
// counts: a rank names only its own, unless it asked the peer for its call).
// A message of the wrong size names the sender's call without its count ("with another count"):
// a message may be part of a call's data.
void expect_named(const Error& e, const std::string& on_rank0, const std::string& on_others) {
  const std::regex count(" x [0-9]+");
  const bool without_counts =
      network_check_only() || std::string(e.what()).find("with another count") != std::string::npos;
  auto as_checked = [&](const std::string& text) {
    return without_counts ? std::regex_replace(text, count, "") : text;
  };
  const std::string m = as_checked(e.what());
  EXPECT_EQ(int(e.code()), int(ErrorCode::invalid_argument)) << m;
  EXPECT_NE(m.find("collective mismatch"), std::string::npos) << m;
  EXPECT_NE(m.find(as_checked(on_rank0)), std::string::npos) << m;
  EXPECT_NE(m.find(as_checked(on_others)), std::string::npos) << m;
}

// Every rank runs `call(comm, odd)` on a fresh group, where `odd` is true on rank 0 only, and
// expects the mismatch named (expect_named). On the network path a call that each rank could
// complete alone (each the root of its own broadcast) fails at one of the next two calls.
// `sends_only`: a rank that only sends may finish too (the senders of gather and reduce), and
// fail at its next call.
template <typename F>
void expect_mismatch(F call, const std::string& on_rank0, const std::string& on_others,
                     bool sends_only = false) {
  auto& w = mp::world();
  Communicator c = w.split(0, w.rank());
  const bool odd = w.rank() == 0;
  const auto t0 = Clock::now();
  try {
    call(c, odd).wait();
    if (network_check_only() || sends_only) {
      c.barrier().wait();
      c.barrier().wait();
    }
    ADD_FAILURE() << "no error on rank " << w.rank();
  } catch (const Error& e) {
    expect_named(e, on_rank0, on_others);
  }
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10)) << "found before STRATA_TIMEOUT";
}

// Mismatch tests need a second rank.
class Mismatch : public ::testing::Test {
 protected:
  void SetUp() override {
    if (mp::world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  }
};

}  // namespace

TEST_F(Mismatch, Count) {
  std::vector<float> a(5, 1.0f);
  expect_mismatch(
      [&](Communicator& c, bool odd) {
        return c.all_reduce(Buffer{a.data(), odd ? 4u : 5u, DataType::f32}, ReduceOp::sum);
      },
      "all_reduce(f32 x 4, sum", "all_reduce(f32 x 5, sum");
}

// A zero-size call is still a call: against a peer's non-empty one it fails every rank, naming
// both, in every kind (it used to return at once and leave the peer to take its next call's data).
TEST_F(Mismatch, ZeroCountAgainstNonEmpty) {
  const size_t n = size_t(mp::world().size());
  const int root = int(n) - 1;
  std::vector<float> in(3 * n, 1.0f), out(3 * n, 0.0f);
  for (const std::string kind : {"all_reduce", "reduce_scatter", "all_gather", "all_to_all",
                                 "broadcast", "reduce", "gather", "scatter"}) {
    SCOPED_TRACE(kind);
    const bool reduces = kind == "all_reduce" || kind == "reduce_scatter" || kind == "reduce";
    const bool rooted =
        kind == "broadcast" || kind == "reduce" || kind == "gather" || kind == "scatter";
    auto named = [&](size_t count) {
      return kind + "(f32 x " + std::to_string(count) + (reduces ? ", sum" : "") +
             (rooted ? ", root " + std::to_string(root) : "");
    };
    expect_mismatch(
        [&](Communicator& c, bool odd) {
          const size_t k = odd ? 0 : 3;  // per rank (a block of all_gather, all_to_all, ...)
          const bool is_root = c.rank() == root;
          Buffer one{in.data(), k, DataType::f32}, all{in.data(), k * n, DataType::f32};
          Buffer one_out{out.data(), k, DataType::f32}, all_out{out.data(), k * n, DataType::f32};
          if (kind == "all_reduce") return c.all_reduce(one, one_out, ReduceOp::sum);
          if (kind == "reduce_scatter") return c.reduce_scatter(all, one_out, ReduceOp::sum);
          if (kind == "all_gather") return c.all_gather(one, all_out);
          if (kind == "all_to_all") return c.all_to_all(all, all_out);
          if (kind == "broadcast") return c.broadcast(one, one_out, root);
          if (kind == "reduce") return c.reduce(one, one_out, ReduceOp::sum, root);
          if (kind == "gather") return c.gather(one, is_root ? all_out : one_out, root);
          return c.scatter(is_root ? all : one, one_out, root);
        },
        named(0), named(3), kind == "reduce" || kind == "gather" || kind == "scatter");
  }
}

// Rank 0 of a fresh group sends rank 1 `sent` elements where every other count, rank 1's
// expectation included, is `each`; then two barriers (a sender that finished first fails at one
// of them). Returns the error this rank saw, `out` as the call left it; none: a failure added.
static std::optional<Error> disagreeing_all_to_allv(size_t each, size_t sent,
                                                    std::vector<float>& out) {
  auto& w = mp::world();
  const int n = w.size();
  std::vector<size_t> sc(n, each), rc(n, each), sd(n), rd(n);
  if (w.rank() == 0) sc[1] = sent;
  for (int j = 1; j < n; ++j) sd[j] = sd[j - 1] + sc[j - 1], rd[j] = rd[j - 1] + rc[j - 1];
  std::vector<float> in(sd[n - 1] + sc[n - 1], 1.0f);
  out.assign(each * size_t(n), -7.0f);
  try {
    // Inside: a rank still in the split's own barrier when the finder tells it fails there.
    Communicator c = w.split(0, w.rank());
    c.all_to_allv(buffer(in), sc, sd, buffer(out), rc, rd).wait();
    c.barrier().wait();
    c.barrier().wait();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error on rank " << w.rank();
  return std::nullopt;
}

// all_to_allv's counts differ by design, but what rank 0 sends rank 1 must be what rank 1 expects
// from it: one element more, or none where it expects 2, fails every rank (on the network path a
// sender that finished first at its next call). The shared segment exchanges every rank's counts
// first, so there every rank names the pair and both counts, as does the hierarchical exchange
// across nodes (its receiver tells the others, who fail at their next call); the pairwise
// network path names the sizes on the receiver, and the finder elsewhere.
TEST_F(Mismatch, AllToAllvCountsThatDisagree) {
  for (const size_t sent : {size_t(3), size_t(0)}) {
    SCOPED_TRACE("rank 0 sends rank 1 " + std::to_string(sent) + " elements, it expects 2");
    std::vector<float> out;
    const std::optional<Error> e = disagreeing_all_to_allv(2, sent, out);
    if (!e) continue;
    const std::string m = e->what();
    EXPECT_EQ(int(e->code()), int(ErrorCode::invalid_argument)) << m;
    EXPECT_NE(m.find("all_to_allv"), std::string::npos) << m;
    if (on_shared_memory() || all_to_allv_hierarchical()) {
      EXPECT_NE(m.find("count mismatch in all_to_allv: rank 0 sends " + std::to_string(sent) +
                       " elements to rank 1, which expects 2 from it"),
                std::string::npos)
          << m;
      continue;
    }
    EXPECT_NE(m.find("collective mismatch"), std::string::npos) << m;
    if (mp::world().rank() == 1) {
      EXPECT_NE(m.find(sent ? "more than 8 bytes" : "sent 0 bytes"), std::string::npos) << m;
    } else {
      EXPECT_NE(m.find("found by rank 1"), std::string::npos) << m;
    }
  }
}

// The hierarchical exchange moves a large call's blocks pairwise (its ranks agree on that from
// the total): a wrong count there is found and named the same way, and the output is untouched.
TEST_F(Mismatch, AllToAllvLargeCountsThatDisagreeAcrossNodes) {
  if (!all_to_allv_hierarchical()) {
    GTEST_SKIP() << "runs where all_to_allv takes the hierarchical exchange: a job across nodes "
                    "of equal size, 2 ranks or more each (tests/cluster.cmake's cluster_2x2)";
  }
  const size_t each = size_t(1) << 20;  // 4 MiB per block: the pairwise side of the choice
  std::vector<float> out;
  const std::optional<Error> e = disagreeing_all_to_allv(each, each + 1, out);
  if (!e) return;
  const std::string m = e->what();
  EXPECT_EQ(int(e->code()), int(ErrorCode::invalid_argument)) << m;
  EXPECT_NE(m.find("count mismatch in all_to_allv: rank 0 sends " + std::to_string(each + 1) +
                   " elements to rank 1, which expects " + std::to_string(each) + " from it"),
            std::string::npos)
      << m;
  if (mp::world().rank() == 1) {
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float v) { return v == -7.0f; }));
  }
}

TEST_F(Mismatch, Dtype) {
  std::vector<double> a(4, 1.0);
  expect_mismatch(
      [&](Communicator& c, bool odd) {
        return c.all_reduce(Buffer{a.data(), odd ? 8u : 4u, odd ? DataType::f32 : DataType::f64},
                            ReduceOp::sum);
      },
      "all_reduce(f32 x 8", "all_reduce(f64 x 4");
}

TEST_F(Mismatch, Reduction) {
  std::vector<float> a(4, 1.0f);
  expect_mismatch(
      [&](Communicator& c, bool odd) {
        return c.all_reduce(buffer(a), odd ? ReduceOp::max : ReduceOp::sum);
      },
      "f32 x 4, max", "f32 x 4, sum");
}

TEST_F(Mismatch, Root) {
  std::vector<int32_t> a(3, 1);
  expect_mismatch([&](Communicator& c, bool odd) { return c.broadcast(buffer(a), odd ? 0 : 1); },
                  "broadcast(i32 x 3, root 0", "broadcast(i32 x 3, root 1");
}

// Between calls the progress thread looks back (every 250 ms): a broadcast each rank completed
// as its own root fails the very next call on the group, on every rank.
TEST_F(Mismatch, RootFoundBetweenCalls) {
  if (!network_check_only()) {
    GTEST_SKIP() << "only the network path without STRATA_CHECK lets such a broadcast return; "
                    "elsewhere the broadcast itself fails (Mismatch.Root covers it)";
  }
  auto& w = mp::world();
  Communicator c = w.split(0, w.rank());
  std::vector<int32_t> a(3, 1);
  try {
    c.broadcast(buffer(a), w.rank() == 0 ? 0 : 1).wait();  // may fail here already (3+ ranks)
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    c.barrier().wait();
    ADD_FAILURE() << "no error on rank " << w.rank();
  } catch (const Error& e) {
    expect_named(e, "broadcast(i32 x 3, root 0", "broadcast(i32 x 3, root 1");
  }
}

TEST_F(Mismatch, DifferentCollective) {
  const int n = mp::world().size();
  std::vector<float> in(4, 1.0f), out(4 * size_t(n));
  expect_mismatch(
      [&](Communicator& c, bool odd) {
        return odd ? c.all_gather(buffer(in), buffer(out))
                   : c.all_reduce(buffer(in), ReduceOp::sum);
      },
      "all_gather(f32 x 4", "all_reduce(f32 x 4, sum");
}

TEST(MismatchCheck, MatchingCallsStillAgreeAndComputeTheSum) {
  if (!checking()) GTEST_SKIP() << "needs STRATA_CHECK=1";
  auto& w = mp::world();
  std::vector<float> a(1000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(w.rank() + 1) * float(i % 7);
  w.all_reduce(buffer(a), ReduceOp::sum).wait();
  const float ranks = float(w.size() * (w.size() + 1) / 2);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], ranks * float(i % 7)) << i;
}

// Without STRATA_CHECK: ranks that disagree on the size of a shared-memory collective all fail
// with a mismatch error (the call travels with every staged chunk), and nothing from a peer
// reaches the output, never a chunk of the wrong size.
class SizeMismatch : public ::testing::TestWithParam<size_t> {
 protected:
  void SetUp() override {
    if (checking() || !on_shared_memory() || mp::world().size() < 2) {
      GTEST_SKIP() << "needs 2 or more ranks to disagree, and STRATA_CHECK off (with it on, the "
                      "fingerprint check catches the mismatch first: Mismatch.*)";
    }
  }
};

TEST_P(SizeMismatch, FailsEveryRankAndLeavesOutputAlone) {
  auto& w = mp::world();
  Communicator c = w.split(0, w.rank());
  const size_t count = GetParam() + (w.rank() == 0 ? 0 : 1);
  std::vector<float> in(count * c.size(), 1.0f), out(count * c.size(), -7.0f);
  auto run = [&](int which) {
    switch (which) {
      case 0:
        return c.all_reduce(Buffer{in.data(), count, DataType::f32},
                            Buffer{out.data(), count, DataType::f32}, ReduceOp::sum);
      case 1:
        return c.all_gather(Buffer{in.data(), count, DataType::f32}, buffer(out));
      case 2:
        return c.broadcast(Buffer{in.data(), count, DataType::f32},
                           Buffer{out.data(), count, DataType::f32}, 0);
      default:
        return c.all_to_all(buffer(in), buffer(out));
    }
  };
  for (int which = 0; which < 4; ++which) {
    SCOPED_TRACE("collective " + std::to_string(which));
    if (which > 0) c = w.split(0, w.rank());  // the failed group is unusable: a fresh one
    std::fill(out.begin(), out.end(), -7.0f);
    // A broadcast root's own output is its input.
    const bool bcast_root = which == 2 && c.rank() == 0;
    try {
      run(which).wait();
      ADD_FAILURE() << "no error on rank " << w.rank();
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(int(e.code()), int(ErrorCode::invalid_argument)) << m;
      EXPECT_NE(m.find("collective mismatch"), std::string::npos) << m;
    }
    // Nothing from a peer lands in the output. (All-gather and all-to-all copy this rank's own
    // block first, from its own input: that block may hold the input's 1.0.)
    const size_t own = size_t(c.rank()) * count;
    for (size_t i = 0; i < out.size() && !bcast_root; ++i) {
      const bool own_block = (which == 1 || which == 3) && i >= own && i < own + count;
      if (own_block && out[i] == 1.0f) continue;
      ASSERT_EQ(out[i], -7.0f) << "output element " << i << " was written";
    }
  }
}

// 5 vs 6 floats: tiny all-reduces (one cache line each) of different sizes; 12 vs 13: a tiny one
// against a staged one; 1000 vs 1001: small all-reduces in one staging buffer each; 2^15: at
// n = 2, all-to-all rounds of one staging buffer against rounds of two; 2^18: staged in chunks.
INSTANTIATE_TEST_SUITE_P(Sizes, SizeMismatch,
                         ::testing::Values(size_t(5), size_t(12), size_t(1000), size_t(1) << 15,
                                           size_t(1) << 18));
