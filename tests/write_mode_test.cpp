// The learned write mode of staging copies (shm/write_mode.hpp), driven with made-up
// timings: which mode each operation runs in, and how the choice follows a change of placement.
#include "shm/write_mode.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
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

// Each mode runs twice in a row and only the second is timed: the first after a switch pays for
// it. Retries are two operations long too.
TEST(WriteModeChoice, MeasuresEachModeTwiceThenKeepsTheFasterAndRetriesTheOtherEvery32nd) {
  WriteModeChoice c;
  // Operation 0 is not timed: were its figure (the caller's buffers faulting in) counted,
  // streaming would be preferred here.
  EXPECT_EQ(c.next(), S);
  c.record(1e-12);
  const auto modes = run(c, 65, [](WriteMode s) { return s == O ? 1e-10 : 3e-10; });
  // Operations 1..65: streaming, ordinary twice (from 2), then ordinary but for 32-33, 64-65.
  auto want = cat({S, O, O}, repeat(O, 28));
  want = cat(cat(cat(want, {S, S}), repeat(O, 30)), {S, S});
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

// The operation just after a switch is not timed: on 2 cores with 4 ranks the first
// single-copy all-to-all after staged ones took twice as long as the next. Here a switch to
// single copy costs 3x and one to a staged mode 0.1x: timed, either would make ordinary win.
TEST(WriteModeChoice, TheFirstOperationAfterASwitchIsNotTimed) {
  WriteModeChoice c;
  WriteMode last = O;
  auto cost = [&](WriteMode m) {
    const double base = m == C ? 1e-10 : 2e-10;
    const double t = m == last ? base : base * (m == C ? 3 : 0.1);
    last = m;
    return t;
  };
  const auto modes = run(c, 8, cost, true);
  EXPECT_EQ(modes, std::vector<WriteMode>({S, S, O, O, C, C, C, C}));
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
  const auto modes = run(c, 96, cost, true);  // operations 0..95
  // Measuring (0..5), then single copy but for the retries at 32-33 and 64-65.
  std::vector<WriteMode> want = {S, S, O, O, C, C};
  for (int i = 6; i < 96; ++i) want.push_back(i / 2 == 16 ? S : i / 2 == 32 ? O : C);
  EXPECT_EQ(modes, want);
}

TEST(WriteModeChoice, NoticesTheOtherModeHasBecomeFasterAtTheNextRetry) {
  WriteModeChoice c;
  bool near = false;
  auto cost = [&](WriteMode s) { return s == S ? 2e-10 : (near ? 1e-10 : 4e-10); };
  run(c, 6, cost);  // operations 0..5: streaming preferred from 4 on
  EXPECT_EQ(c.preferred(), S);
  near = true;                          // ordinary is now faster, but only a retry can see it
  const auto modes = run(c, 30, cost);  // operations 6..35
  // Operations 32-33 retry ordinary; 33's figure replaces the stale one and ordinary wins.
  EXPECT_EQ(modes, cat(repeat(S, 26), repeat(O, 4)));
}

TEST(WriteModeChoice, MeasuresSingleCopyOnceOfferedAndRetriesTheOthersInTurn) {
  WriteModeChoice c;
  auto cost = [](WriteMode m) { return m == C ? 1e-10 : m == O ? 2e-10 : 3e-10; };
  // Not offered at first (the peers have not all said they may read this process): the
  // staging modes alone.
  EXPECT_EQ(run(c, 6, cost), std::vector<WriteMode>({S, S, O, O, O, O}));
  EXPECT_EQ(c.preferred(true), O);  // offered but never measured
  // Offered from operation 6: measured at once (twice: 6 is a switch), then preferred; retries
  // at 32-33 and 64-65 take the two others in turn (streaming at 32 = 1 x 32, ordinary at 64).
  const auto modes = run(c, 60, cost, true);  // operations 6..65
  const auto want = cat(cat(cat(repeat(C, 26), {S, S}), repeat(C, 30)), {O, O});
  EXPECT_EQ(modes, want);
  EXPECT_EQ(c.preferred(true), C);
  // No longer offered: never chosen, whatever it measured.
  EXPECT_EQ(c.preferred(false), O);
  EXPECT_EQ(c.next(false), O);
}

TEST(WriteModeChoice, KeepsStagingWhereSingleCopyIsSlower) {
  WriteModeChoice c;
  auto cost = [](WriteMode m) { return m == C ? 5e-10 : m == O ? 1e-10 : 3e-10; };
  const auto modes = run(c, 34, cost, true);  // operations 0..33
  EXPECT_EQ(modes, cat(cat({S, S, O, O, C, C}, repeat(O, 26)), {C, C}));
  EXPECT_EQ(c.preferred(true), O);
}

// Ranks that each followed their own timings mixed modes in one operation (n = 4 on 2 cores:
// two ranks single copy, two ordinary) and timed the mixture. A group's followers run the mode
// the leader publishes, trials included, whatever their own timings say.
TEST(WriteModeChoice, AGroupRunsItsLeadersModesInStep) {
  std::atomic<uint8_t> led{0};
  const shm::GroupChoice leads{&led, true}, follows{&led, false};
  WriteModeChoice leader, follower;
  for (int op = 0; op < 70; ++op) {
    const WriteMode l = leader.next(true, leads), f = follower.next(true, follows);
    EXPECT_EQ(f, l) << op;
    leader.record(l == C ? 1e-10 : 2e-10, leads);      // the leader finds single copy faster,
    follower.record(l == O ? 1e-10 : 2e-10, follows);  // the follower ordinary stores
  }
  EXPECT_EQ(leader.preferred(true), C);
  EXPECT_EQ(follower.preferred(true), O);  // its own, which it does not follow
  EXPECT_EQ(led.load(), 1 + int(C));
  // A leader's choice this rank is not offered (single copy) is not followed.
  EXPECT_EQ(follower.next(false, follows), O);
}

TEST(StagingCopy, SingleCopyStagesNothingAndIsForcedOnlyWhereOffered) {
  const size_t n = 1 << 20;
  std::vector<unsigned char> src(64, 7), dst(64, 0);
  shm::SizedWriteModeChoice c;
  shm::StagingCopy offered(&c, n, nullptr, true, ShmWriteMode::single_copy);
  EXPECT_EQ(offered.mode(), C);
  offered(dst.data(), src.data(), src.size());
  EXPECT_EQ(dst, std::vector<unsigned char>(64, 0));  // nothing staged
  offered.done();
  shm::StagingCopy refused(&c, n, nullptr, false, ShmWriteMode::single_copy);
  EXPECT_EQ(refused.mode(), O);
  refused(dst.data(), src.data(), src.size());
  EXPECT_EQ(dst, src);
  refused.done();
  // Forced, even below the sizes that are learned; and nothing was learned.
  EXPECT_EQ(shm::StagingCopy(&c, 100, nullptr, true, ShmWriteMode::single_copy).mode(), C);
  EXPECT_EQ(c.at(n, false)->next(true), S);  // the class's operation 0
}

// Broadcast's root has no choices: ordinary stores, never timed, unless a mode is forced.
TEST(StagingCopy, WithoutChoicesStagesWithOrdinaryStoresUnlessForced) {
  const size_t n = size_t(1) << 20;
  EXPECT_EQ(shm::StagingCopy(nullptr, n, nullptr, true, ShmWriteMode::learn).mode(),
            shm::WriteMode::ordinary);
  EXPECT_EQ(shm::StagingCopy(nullptr, n, nullptr, true, ShmWriteMode::streaming).mode(),
            shm::WriteMode::streaming);
  EXPECT_EQ(shm::StagingCopy(nullptr, n, nullptr, true, ShmWriteMode::single_copy).mode(),
            shm::WriteMode::single_copy);
  shm::StagingCopy copy(nullptr, n, nullptr);
  copy.done();  // records nowhere
}

TEST(StagingCopy, ForcedModesAreNeitherLearnedNorTimed) {
  const size_t n = 1 << 20;
  for (auto [policy, mode] : {std::pair{ShmWriteMode::ordinary, O}, {ShmWriteMode::streaming, S}}) {
    shm::SizedWriteModeChoice c;
    for (int i = 0; i < 40; ++i) {
      shm::StagingCopy copy(&c, n, nullptr, false, policy);
      EXPECT_EQ(copy.mode(), mode) << i;
      copy.done();
    }
    // The class was never asked: learning would start from its operation 0.
    EXPECT_EQ(c.at(n, false)->preferred(), O);
    std::vector<WriteMode> first;
    for (int i = 0; i < 3; ++i) first.push_back(c.at(n, false)->next());
    EXPECT_EQ(first, std::vector<WriteMode>({S, S, O}));
  }
}

TEST(SizedWriteModeChoice, LearnsFrom64KiBPerFactorOf4From256KiBOversubscribed) {
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
  // More ranks than cores: from 256 KiB only, in the same classes.
  EXPECT_EQ(c.at(256 * K - 1, true), nullptr);
  EXPECT_EQ(c.at(256 * K, true), c.at(256 * K, false));
  EXPECT_EQ(c.at(64 * M, true), c.at(64 * M, false));
  // Each class publishes its group's choice at its own index, after the classes before it.
  const shm::SizedWriteModeChoice third(2 * shm::SizedWriteModeChoice::kSizeClasses);
  EXPECT_EQ(third.led_index(64 * K), 10);
  EXPECT_EQ(third.led_index(M), 12);
  EXPECT_EQ(third.led_index(size_t(1) << 40), 14);
}

TEST(StagingCopy, CopiesInEitherModeAndTimesEachOperation) {
  shm::SizedWriteModeChoice c;
  const size_t n = 300 * 1024 + 40;  // not a whole number of vectors
  std::vector<unsigned char> src(n), dst(n);
  for (size_t i = 0; i < n; ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
  for (WriteMode want : {S, S, O, O}) {  // each mode twice, the second timed
    std::fill(dst.begin(), dst.end(), 0);
    shm::StagingCopy copy(&c, n, nullptr);
    EXPECT_EQ(copy.mode(), want);
    copy(dst.data() + 1, src.data() + 1, n - 1);  // unaligned
    // Ordinary stores made to look slow (an operation is timed from construction to done()):
    // 20 ms for 300 KiB, where a copy takes microseconds.
    if (want == O) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    copy.done();
    EXPECT_EQ(std::memcmp(dst.data() + 1, src.data() + 1, n - 1), 0);
    EXPECT_EQ(dst[0], 0);
  }
  // done() timed each mode's second operation: streaming is preferred (with nothing recorded
  // the choice would stay with ordinary stores), and operation 4, not a retry, runs in it.
  EXPECT_EQ(c.at(n, false)->preferred(), S);
  EXPECT_EQ(c.at(n, false)->next(), S);
  // Below 64 KiB: ordinary stores, and no class is touched.
  shm::StagingCopy small(&c, 1000, nullptr);
  EXPECT_EQ(small.mode(), O);
  small.done();
}
