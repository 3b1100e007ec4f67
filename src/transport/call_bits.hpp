// What every collective message says of the call it belongs to: its kind, dtype and reduction in
// 12 bits of its tag (tags.hpp). A receiver matches messages without them and compares them on
// arrival, so ranks whose calls differ there fail at once, naming both, for no extra message or
// byte (the network path's always-on mismatch check; docs/architecture.md, "Mismatches").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "strata/types.hpp"

namespace strata::transport {

/// `op` is the collective's name as errors spell it ("all_reduce", ...); `reduce` < 0: none.
uint32_t call_bits(std::string_view op, DataType dt, int reduce);

/// "all_reduce(f32, sum)"; with `count` >= 0, "all_reduce(f32 x 4, sum)".
std::string describe_call(uint32_t bits, int64_t count = -1);

}  // namespace strata::transport
