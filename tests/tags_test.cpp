// The message tag layout (src/transport/tags.hpp): fields land in their bits and come back out,
// the step ranges the algorithms share are disjoint, and a step past its range is refused.
#include "transport/tags.hpp"

#include <gtest/gtest.h>

#include <set>

#include "transport/calls/call_bits.hpp"

namespace tags = strata::transport::tags;

TEST(Tags, CollectiveFieldsLandInTheirBits) {
  const uint64_t t = tags::collective(0xFFFF, 0x7ABCD, 0x1234, 0xABC);
  EXPECT_EQ(t >> 63, 0u);
  EXPECT_TRUE(tags::is_collective(t));
  EXPECT_EQ((t >> 47) & 0xFFFF, 0xFFFFu);
  EXPECT_EQ((t >> 28) & 0x7FFFF, 0x7ABCDu);
  EXPECT_EQ((t >> 16) & 0xFFF, 0xABCu);
  EXPECT_EQ(tags::call_of(t), 0xABCu);
  EXPECT_EQ(t & 0xFFFF, 0x1234u);
  // The sequence number wraps into its 16 bits instead of spilling into the p2p bit.
  EXPECT_EQ(tags::collective(uint64_t(1) << 16, 5, 7), tags::collective(0, 5, 7));
  // A collective receive masks the call only: another call's message matches, and is compared.
  const uint64_t mask = ~tags::kCallMask;
  EXPECT_EQ(tags::collective(3, 5, 7, 0x123) & mask, tags::collective(3, 5, 7, 0x456) & mask);
  EXPECT_NE(tags::collective(3, 5, 7) & mask, tags::collective(3, 5, 8) & mask);
  EXPECT_NE(tags::collective(3, 5, 7) & mask, tags::collective(3, 6, 7) & mask);
}

TEST(Tags, CallBitsTellKindDtypeAndReductionApart) {
  using strata::DataType;
  using strata::ReduceOp;
  namespace t = strata::transport;
  const uint32_t sum_f32 = t::call_bits("all_reduce", DataType::f32, int(ReduceOp::sum));
  EXPECT_LT(sum_f32, 1u << tags::kCallBits);
  EXPECT_NE(sum_f32, t::call_bits("all_reduce", DataType::i32, int(ReduceOp::sum)));
  EXPECT_NE(sum_f32, t::call_bits("all_reduce", DataType::f32, int(ReduceOp::max)));
  EXPECT_NE(sum_f32, t::call_bits("reduce_scatter", DataType::f32, int(ReduceOp::sum)));
  EXPECT_NE(t::call_bits("all_gather", DataType::c128, -1),
            t::call_bits("all_gather", DataType::c64, -1));
  EXPECT_EQ(t::describe_call(sum_f32, 4), "all_reduce(f32 x 4, sum)");
  EXPECT_EQ(t::describe_call(t::call_bits("broadcast", DataType::bf16, -1)), "broadcast(bf16)");
  // A barrier moves no data, all_to_allv's counts differ by design: neither is named.
  EXPECT_EQ(t::describe_call(t::call_bits("barrier", DataType::u8, -1), 0), "barrier()");
  EXPECT_EQ(t::describe_call(t::call_bits("all_to_allv", DataType::f32, -1), 6),
            "all_to_allv(f32)");
  EXPECT_EQ(t::describe_call({t::call_bits("broadcast", DataType::i32, -1), 1, 3}),
            "broadcast(i32 x 3, root 1)");
}

TEST(Tags, CallsAreCompatibleOnlyWhenEverythingAgrees) {
  using strata::DataType;
  namespace t = strata::transport;
  const uint32_t bcast = t::call_bits("broadcast", DataType::f32, -1);
  const t::Call root0{bcast, 0, 8};
  EXPECT_TRUE(t::compatible(root0, root0));
  EXPECT_FALSE(t::compatible(root0, {bcast, 1, 8}));
  EXPECT_FALSE(t::compatible(root0, {bcast, 0, 9}));
  EXPECT_FALSE(t::compatible(root0, {t::call_bits("broadcast", DataType::i32, -1), 0, 8}));
  EXPECT_TRUE(t::compatible(root0, {bcast, 0, -1})) << "an unknown count is not a difference";
  // all_to_allv's ranks send different amounts by design.
  const uint32_t a2av = t::call_bits("all_to_allv", DataType::f32, -1);
  EXPECT_TRUE(t::compatible({a2av, -1, 5}, {a2av, -1, 7}));
  const uint32_t a2a = t::call_bits("all_to_all", DataType::f32, -1);
  EXPECT_FALSE(t::compatible({a2av, -1, 5}, {a2a, -1, 5}));
}

TEST(Tags, PointToPointAndControlAreApartFromCollectives) {
  const uint64_t p = tags::p2p(0x7FFFF, 0xFFFFFFFFu);
  EXPECT_EQ(p >> 63, 1u);
  EXPECT_FALSE(tags::is_collective(p));
  EXPECT_EQ((p >> 62) & 1, 0u) << "a user tag never reads as a control notice";
  EXPECT_EQ(tags::source_of_p2p(p), 0x7FFFF);
  EXPECT_EQ(tags::source_of_p2p(tags::p2p(42, 7)), 42);
  const uint64_t c = tags::control(42, tags::Control::query);
  EXPECT_EQ(c >> 62, 3u);
  EXPECT_EQ(tags::source_of_p2p(c), 42);
  // An any-source receive masks the source only: it matches every sender's p2p tag, and no
  // control message; a control receive matches its own kind only.
  const uint64_t mask = ~tags::kSourceBits;
  EXPECT_EQ(tags::p2p(9, 7) & mask, tags::p2p(0, 7) & mask);
  EXPECT_NE(tags::control(9, tags::Control::notice) & mask, tags::p2p(0, 0) & mask);
  EXPECT_EQ(tags::control(9, tags::Control::answer) & mask,
            tags::control(0, tags::Control::answer) & mask);
  EXPECT_NE(tags::control(9, tags::Control::answer) & mask,
            tags::control(0, tags::Control::query) & mask);
}

TEST(Tags, SequenceAndSourceComeBackOutOfACollectiveTag) {
  const uint64_t t = tags::collective(0x1234, 0x7ABCD, 0xFFFF, 0xFFF);
  EXPECT_EQ(tags::seq_of(t), 0x1234u);
  EXPECT_EQ(tags::source_of_collective(t), 0x7ABCD);
  // A probe for one call's messages (any source, step or call) matches no other call's, and no
  // point-to-point or control message.
  const uint64_t probe = tags::collective(0x1234, 0, 0);
  EXPECT_EQ(t & tags::kSeqMask, probe & tags::kSeqMask);
  EXPECT_NE(tags::collective(0x1235, 0x7ABCD, 0xFFFF, 0xFFF) & tags::kSeqMask,
            probe & tags::kSeqMask);
  EXPECT_NE(tags::p2p(0, 0) & tags::kSeqMask, tags::collective(0, 0, 0) & tags::kSeqMask);
  EXPECT_NE(tags::control(0, tags::Control::notice) & tags::kSeqMask,
            tags::collective(0, 0, 0) & tags::kSeqMask);
}

TEST(Tags, SharedStepRangesAreDisjoint) {
  const tags::Steps shared[] = {tags::kRingReduceScatter, tags::kRingAllGather, tags::kFold,
                                tags::kUnfold, tags::kFingerprint};
  std::set<uint32_t> seen;
  size_t total = 0;
  for (const auto& r : shared) {
    for (uint32_t s = r.first; s < r.end(); ++s) seen.insert(s);
    total += r.count;
    EXPECT_LE(r.end(), uint32_t(1) << tags::kStepBits);
  }
  EXPECT_EQ(seen.size(), total);
}

TEST(Tags, StepPastItsRangeIsRefused) {
  EXPECT_EQ(tags::kRingAllGather.at(0, "t"), 0x8000u);
  EXPECT_EQ(tags::kRingAllGather.at(0x6FFF, "t"), 0xEFFFu);
  try {
    tags::kRingAllGather.at(0x7000, "ring all_gather");
    FAIL() << "a step past the range was accepted";
  } catch (const strata::Error& e) {
    EXPECT_EQ(e.code(), strata::ErrorCode::internal);
    EXPECT_NE(std::string(e.what()).find("ring all_gather"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("28672 steps"), std::string::npos) << e.what();
  }
}

TEST(Tags, RingReduceScatterStepsStayInTheirRange) {
  // Ring reduce-scatter tags step * max_chunks + chunk, wrapped: the two steps in flight at once
  // never share a tag while 2 * max_chunks fits the range, however many ranks (the former
  // step * 4099 + chunk left 16 bits at 18 ranks).
  for (uint64_t chunks : {1u, 3u, 4099u, 0x4000u}) {
    for (uint64_t step = 0; step < 40000; step += 997) {
      std::set<uint32_t> in_flight;
      for (uint64_t s = step; s < step + 2; ++s) {
        for (uint64_t k = 0; k < chunks; ++k) {
          uint32_t t = tags::kRingReduceScatter.wrapped(s * chunks + k);
          EXPECT_LT(t, tags::kRingAllGather.first);
          in_flight.insert(t);
        }
      }
      EXPECT_EQ(in_flight.size(), 2 * chunks) << chunks << " chunks, step " << step;
    }
  }
}
