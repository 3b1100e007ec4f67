// What every collective message says of the call it belongs to: its kind, dtype and reduction in
// 12 bits of its tag (tags.hpp). A receiver matches messages without them and compares them on
// arrival, so ranks whose calls differ there fail at once, naming both, for no extra message or
// byte (the network path's always-on mismatch check; docs/architecture.md, "Mismatches").
// Calls whose messages never meet are compared whole (Call, with root and count) when a wait
// blocks or a message goes unclaimed (call_history.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "strata/types.hpp"

namespace strata::transport {

/// `op` is the collective's name as errors spell it ("all_reduce", ...); `reduce` < 0: none.
uint32_t call_bits(std::string_view op, DataType dt, int reduce);

/// "all_reduce(f32, sum)"; with `count` >= 0, "all_reduce(f32 x 4, sum)"; with `root` >= 0,
/// "broadcast(f32 x 4, root 1)".
std::string describe_call(uint32_t bits, int64_t count = -1, int root = -1);

/// One rank's collective call, whole: what ranks compare when their messages cannot.
struct Call {
  uint32_t bits = 0;   ///< call_bits()
  int32_t root = -1;   ///< rooted collectives; else -1
  int64_t count = -1;  ///< this rank's count; -1: unknown
};

std::string describe_call(const Call& c);

/// False when two ranks' calls cannot be parts of one collective: kind, dtype, reduction or root
/// differ, or their counts do (but all_to_allv's, which differ by design, and unknown ones).
bool compatible(const Call& a, const Call& b);

}  // namespace strata::transport
