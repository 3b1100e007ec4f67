// Message tags, allocated here and nowhere else: the 64-bit layout a transport puts on the wire,
// and the ranges of collective steps the algorithms and the runtime share.
//
// Collective message: [63]=0 | seq:16 | source rank:19 | call:12 | step:16.
// Point-to-point:     [63]=1 | [62]=0 | 0:11 | source rank:19 | user tag:32.
// Control:           [63]=1 | [62]=1 | 0:11 | source rank:19 | kind:32 (Control below).
// A receive matches every bit, but an any-source one, which masks only the source's, and a
// collective one, which masks the call (call_bits.hpp): the receiver compares it on arrival.
//
// Two messages with equal tags between one pair match in the order they were posted, so a tag
// must differ only from those that can be in flight beside it; the sequence number (wrapping
// after 2^16 collectives) tells operations apart, the step the messages inside one.
#pragma once

#include <cstdint>
#include <string>

#include "strata/error.hpp"

namespace strata::transport::tags {

constexpr int kSeqBits = 16, kRankBits = 19, kCallBits = 12, kStepBits = 16, kUserTagBits = 32;
static_assert(1 + kSeqBits + kRankBits + kCallBits + kStepBits == 64,
              "a collective tag fills 64 bits");
static_assert(2 + 11 + kRankBits + kUserTagBits == 64, "a point-to-point tag fills 64 bits");

/// The largest group the tags can name.
constexpr int64_t kMaxRanks = int64_t(1) << kRankBits;

constexpr uint64_t kP2PBit = uint64_t(1) << 63;
constexpr uint64_t kControlBit = uint64_t(1) << 62;
constexpr uint64_t kSourceBits = ((uint64_t(1) << kRankBits) - 1) << kUserTagBits;
/// The call's bits of a collective tag.
constexpr uint64_t kCallMask = ((uint64_t(1) << kCallBits) - 1) << kStepBits;

/// Steps of one collective: [first, first + count). Algorithms that run alone in their sequence
/// number (binomial, linear, pairwise, recursive doubling, halving-doubling, dissemination)
/// number their steps from 0; those that share one (ring all-reduce = reduce-scatter then
/// all-gather; a fold around recursive doubling; the mismatch check before any of them) take
/// disjoint ranges.
struct Steps {
  uint32_t first, count;
  constexpr uint32_t end() const { return first + count; }
  /// Step `i` of the range; an `i` past its end is a bug in the caller, reported, never wrapped
  /// into a neighbour's range.
  uint32_t at(uint64_t i, const char* who) const {
    if (i >= count) {
      throw Error(ErrorCode::internal, {.op = who},
                  "message step " + std::to_string(i) + " is past the " + std::to_string(count) +
                      " steps allocated to it (src/transport/tags.hpp)");
    }
    return first + uint32_t(i);
  }
  /// Step `i` modulo the range: for messages of which at most `count` are in flight between one
  /// pair (beyond that, equal tags still match in the order they were posted).
  constexpr uint32_t wrapped(uint64_t i) const { return first + uint32_t(i % count); }
};

constexpr Steps kFromZero{0, 0xF000};            ///< an algorithm alone in its sequence number
constexpr Steps kRingReduceScatter{0, 0x8000};   ///< (step * chunks + chunk) mod count
constexpr Steps kRingAllGather{0x8000, 0x7000};  ///< one step per ring step
constexpr Steps kFold{0xFFFD, 1};                ///< fold to a power of two, before the algorithm
constexpr Steps kUnfold{0xFFFE, 1};              ///< ... and back, after it
constexpr Steps kFingerprint{0xFFFF, 1};         ///< STRATA_CHECK's exchange, before any algorithm
static_assert(kRingAllGather.first == kRingReduceScatter.end());
static_assert(kRingAllGather.end() <= kFold.first && kFold.end() == kUnfold.first &&
              kUnfold.end() == kFingerprint.first);
static_assert(kFingerprint.end() == uint32_t(1) << kStepBits, "steps fit their 16 bits");

/// The tag of a collective's message from `src` at `step` (< 2^16, see Steps), in call `call`
/// (call_bits.hpp, < 2^12).
constexpr uint64_t collective(uint64_t seq, int src, uint32_t step, uint32_t call = 0) {
  return ((seq & ((uint64_t(1) << kSeqBits) - 1)) << (kRankBits + kCallBits + kStepBits)) |
         (uint64_t(uint32_t(src)) << (kCallBits + kStepBits)) |
         (uint64_t(call & ((1u << kCallBits) - 1)) << kStepBits) | step;
}
constexpr uint32_t call_of(uint64_t tag) { return uint32_t((tag & kCallMask) >> kStepBits); }
/// The sequence number's bits of a collective tag, and bit 63 (which says collective).
constexpr uint64_t kSeqMask =
    (uint64_t(1) << 63) | (((uint64_t(1) << kSeqBits) - 1) << (kRankBits + kCallBits + kStepBits));
constexpr uint64_t seq_of(uint64_t tag) {
  return (tag >> (kRankBits + kCallBits + kStepBits)) & ((uint64_t(1) << kSeqBits) - 1);
}
constexpr int source_of_collective(uint64_t tag) {
  return int((tag >> (kCallBits + kStepBits)) & ((uint64_t(1) << kRankBits) - 1));
}
constexpr bool is_collective(uint64_t tag) { return (tag >> 63) == 0; }
constexpr uint64_t p2p(int src, uint32_t user_tag) {
  return kP2PBit | (uint64_t(uint32_t(src)) << kUserTagBits) | user_tag;
}
/// Control messages, each kind with its own always-posted receive (but a goodbye, received only
/// when a communicator closes: ucx/worker_close.cpp).
enum class Control : uint32_t { notice = 0, query = 1, answer = 2, goodbye = 3 };
constexpr uint64_t control(int src, Control kind) { return p2p(src, uint32_t(kind)) | kControlBit; }
constexpr int source_of_p2p(uint64_t tag) { return int((tag & kSourceBits) >> kUserTagBits); }

}  // namespace strata::transport::tags
