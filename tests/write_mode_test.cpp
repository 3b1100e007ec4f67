// The learned write mode of staging copies (shm/write_mode.hpp), driven with made-up
// timings: which mode each operation runs in, and how the choice follows a change of placement.
#include "shm/write_mode.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

using namespace strata;
using shm::WriteMode;
using shm::WriteModeChoice;

namespace {

constexpr WriteMode O = WriteMode::ordinary, S = WriteMode::streaming, C = WriteMode::single_copy;

// Runs `ops` operations, each timed at `cost(mode)`; returns the modes they ran in.
template <class Cost>
std::vector<WriteMode> run(WriteModeChoice& c, int ops, Cost cost, bool single_copy = false) {
  std::vector<WriteMode> modes;
  for (int i = 0; i < ops; ++i) {
    modes.push_back(c.next(single_copy));
    c.record(cost(modes.back()));
  }
  return modes;
}

std::vector<WriteMode> repeat(WriteMode s, int n) { return std::vector<WriteMode>(size_t(n), s); }

std::vector<WriteMode> cat(std::vector<WriteMode> a, const std::vector<WriteMode>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST(WriteModeChoice, MeasuresBothThenKeepsTheFasterAndRetriesTheOtherEvery16th) {
  WriteModeChoice c;
  // Operation 0 is not timed: were its figure (the caller's buffers faulting in) counted,
  // ordinary would never be preferred here.
  EXPECT_EQ(c.next(), O);
  c.record(1.0);
  const auto modes = run(c, 32, [](WriteMode s) { return s == O ? 1e-10 : 3e-10; });
  // Operations 1..32: streaming, ordinary (measured once each), then ordinary but for 16, 32.
  const auto want = cat(cat(cat({S, O}, repeat(O, 13)), cat({S}, repeat(O, 15))), {S});
  EXPECT_EQ(modes, want);
  EXPECT_EQ(c.preferred(), O);
}

TEST(WriteModeChoice, SwitchesOnceThePreferredModeStaysSlow) {
  WriteModeChoice c;
  bool far = false;
  auto cost = [&](WriteMode s) { return s == O ? (far ? 4e-10 : 1e-10) : 2e-10; };
  run(c, 10, cost);
  EXPECT_EQ(c.preferred(), O);
  far = true;  // ordinary: 1 -> 4, streaming 2: ordinary's window holds a 1 for two more
  const auto modes = run(c, 5, cost);
  EXPECT_EQ(modes, std::vector<WriteMode>({O, O, O, S, S}));
}

// A single operation slowed by the host (a preemption: 10x) does not move the choice: on the
// Intel host at 1 MiB such samples sent over a third of the operations to modes 2x slower.
TEST(WriteModeChoice, IgnoresOneSlowOperation) {
  WriteModeChoice c;
  int op = 0;
  auto cost = [&](WriteMode s) {
    const double base = s == C ? 1e-10 : 2e-10;
    return ++op % 5 == 0 ? 10 * base : base;  // every fifth operation preempted
  };
  const auto modes = run(c, 64, cost, true);  // operations 0..63
  // Measuring (0..3), then single copy but for the retries at 16, 32 and 48.
  std::vector<WriteMode> want = {O, S, O, C};
  for (int i = 4; i < 64; ++i) want.push_back(i == 16 || i == 48 ? S : i == 32 ? O : C);
  EXPECT_EQ(modes, want);
}

TEST(WriteModeChoice, NoticesTheOtherModeHasBecomeFasterAtTheNextRetry) {
  WriteModeChoice c;
  bool near = false;
  auto cost = [&](WriteMode s) { return s == S ? 2e-10 : (near ? 1e-10 : 4e-10); };
  run(c, 5, cost);  // operations 0..4: streaming preferred from 3 on
  EXPECT_EQ(c.preferred(), S);
  near = true;                          // ordinary is now faster, but only a retry can see it
  const auto modes = run(c, 13, cost);  // operations 5..17
  // Operation 16 retries ordinary; its figure replaces the stale one and ordinary wins at once.
  EXPECT_EQ(modes, cat(cat(repeat(S, 11), {O}), {O}));
}

TEST(WriteModeChoice, MeasuresSingleCopyOnceOfferedAndRetriesTheOthersInTurn) {
  WriteModeChoice c;
  auto cost = [](WriteMode m) { return m == C ? 1e-10 : m == O ? 2e-10 : 3e-10; };
  // Not offered at first (the peers have not all said they may read this process): the
  // staging modes alone.
  EXPECT_EQ(run(c, 4, cost), std::vector<WriteMode>({O, S, O, O}));
  EXPECT_EQ(c.preferred(true), O);  // offered but never measured
  // Offered from operation 4: measured at once, then preferred; retries at 16 and 32 take the
  // two others in turn (streaming at 16 = 1 x 16, ordinary at 32).
  const auto modes = run(c, 29, cost, true);  // operations 4..32
  const auto want = cat(cat(cat({C}, repeat(C, 11)), cat({S}, repeat(C, 15))), {O});
  EXPECT_EQ(modes, want);
  EXPECT_EQ(c.preferred(true), C);
  // No longer offered: never chosen, whatever it measured.
  EXPECT_EQ(c.preferred(false), O);
  EXPECT_EQ(c.next(false), O);
}

TEST(WriteModeChoice, KeepsStagingWhereSingleCopyIsSlower) {
  WriteModeChoice c;
  auto cost = [](WriteMode m) { return m == C ? 5e-10 : m == O ? 1e-10 : 3e-10; };
  const auto modes = run(c, 17, cost, true);  // operations 0..16
  EXPECT_EQ(modes, cat(cat({O, S, O, C}, repeat(O, 12)), {C}));
  EXPECT_EQ(c.preferred(true), O);
}

TEST(StagingCopy, SingleCopyStagesNothingAndIsForcedOnlyWhereOffered) {
  const size_t n = 1 << 20;
  std::vector<unsigned char> src(64, 7), dst(64, 0);
  shm::SizedWriteModeChoice c;
  shm::StagingCopy offered(&c, n, false, true, ShmWriteMode::single_copy);
  EXPECT_EQ(offered.mode(), C);
  offered(dst.data(), src.data(), src.size());
  EXPECT_EQ(dst, std::vector<unsigned char>(64, 0));  // nothing staged
  offered.done();
  shm::StagingCopy refused(&c, n, false, false, ShmWriteMode::single_copy);
  EXPECT_EQ(refused.mode(), O);
  refused(dst.data(), src.data(), src.size());
  EXPECT_EQ(dst, src);
  refused.done();
  // Forced, even below the sizes that are learned; and nothing was learned.
  EXPECT_EQ(shm::StagingCopy(&c, 100, false, true, ShmWriteMode::single_copy).mode(), C);
  EXPECT_EQ(c.at(n, false)->next(true), O);  // the class's operation 0
}

// Broadcast's root has no choices: ordinary stores, never timed, unless a mode is forced.
TEST(StagingCopy, WithoutChoicesStagesWithOrdinaryStoresUnlessForced) {
  const size_t n = size_t(1) << 20;
  EXPECT_EQ(shm::StagingCopy(nullptr, n, false, true, ShmWriteMode::learn).mode(),
            shm::WriteMode::ordinary);
  EXPECT_EQ(shm::StagingCopy(nullptr, n, false, true, ShmWriteMode::streaming).mode(),
            shm::WriteMode::streaming);
  EXPECT_EQ(shm::StagingCopy(nullptr, n, false, true, ShmWriteMode::single_copy).mode(),
            shm::WriteMode::single_copy);
  shm::StagingCopy copy(nullptr, n, false);
  copy.done();  // records nowhere
}

TEST(StagingCopy, ForcedModesAreNeitherLearnedNorTimed) {
  const size_t n = 1 << 20;
  for (auto [policy, mode] : {std::pair{ShmWriteMode::ordinary, O}, {ShmWriteMode::streaming, S}}) {
    shm::SizedWriteModeChoice c;
    for (int i = 0; i < 40; ++i) {
      shm::StagingCopy copy(&c, n, false, false, policy);
      EXPECT_EQ(copy.mode(), mode) << i;
      copy.done();
    }
    // The class was never asked: learning would start from its operation 0.
    EXPECT_EQ(c.at(n, false)->preferred(), O);
    std::vector<WriteMode> first;
    for (int i = 0; i < 3; ++i) first.push_back(c.at(n, false)->next());
    EXPECT_EQ(first, std::vector<WriteMode>({O, S, O}));
  }
}

TEST(SizedWriteModeChoice, LearnsFrom64KiBPerFactorOf4From4MiBOversubscribed) {
  shm::SizedWriteModeChoice c;
  const size_t K = 1024, M = K * K;
  EXPECT_EQ(c.at(64 * K - 1, false), nullptr);
  // Class boundaries at 256 KiB, 1, 4 and 16 MiB; everything larger shares the last class.
  const size_t first[] = {64 * K, 256 * K, M, 4 * M, 16 * M};
  for (int i = 0; i < 5; ++i) {
    ASSERT_NE(c.at(first[i], false), nullptr);
    if (i < 4) {
      EXPECT_EQ(c.at(first[i], false), c.at(first[i + 1] - 1, false)) << i;
    }
    if (i > 0) {
      EXPECT_NE(c.at(first[i], false), c.at(first[i] - 1, false)) << i;
    }
  }
  EXPECT_EQ(c.at(size_t(1) << 40, false), c.at(16 * M, false));
  // More ranks than cores: from 4 MiB only, in the same classes.
  EXPECT_EQ(c.at(4 * M - 1, true), nullptr);
  EXPECT_EQ(c.at(4 * M, true), c.at(4 * M, false));
  EXPECT_EQ(c.at(64 * M, true), c.at(64 * M, false));
}

TEST(StagingCopy, CopiesInEitherModeAndTimesEachOperation) {
  shm::SizedWriteModeChoice c;
  const size_t n = 300 * 1024 + 40;  // not a whole number of vectors
  std::vector<unsigned char> src(n), dst(n);
  for (size_t i = 0; i < n; ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
  for (WriteMode want : {O, S, O}) {  // untimed, then each mode measured once
    std::fill(dst.begin(), dst.end(), 0);
    shm::StagingCopy copy(&c, n, false);
    EXPECT_EQ(copy.mode(), want);
    copy(dst.data() + 1, src.data() + 1, n - 1);  // unaligned
    copy.done();
    EXPECT_EQ(std::memcmp(dst.data() + 1, src.data() + 1, n - 1), 0);
    EXPECT_EQ(dst[0], 0);
  }
  // Both modes measured by real copies: operation 3 (not a retry) runs in the preferred one.
  const WriteMode p = c.at(n, false)->preferred();
  EXPECT_EQ(c.at(n, false)->next(), p);
  // Below 64 KiB: ordinary stores, and no class is touched.
  shm::StagingCopy small(&c, 1000, false);
  EXPECT_EQ(small.mode(), O);
  small.done();
}
