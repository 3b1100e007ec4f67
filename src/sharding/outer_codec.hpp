// The wire format of DiLoCo's quantised exchange: an island's pseudo-gradient packed as bf16, or
// as int8 with one float scale per block of kInt8Block elements (scale = the block's largest
// magnitude / 127, values rounded to the nearest step: each off by at most half a step).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "strata/diloco.hpp"

namespace strata::sharding {

inline constexpr size_t kInt8Block = 256;

/// Bytes one island sends for n elements (bf16 or int8; f32 is all-reduced, never packed).
size_t packed_bytes(OuterDtype dtype, size_t n);
/// Packs x into out (packed_bytes(dtype, x.size()) bytes).
void pack(OuterDtype dtype, std::span<const float> x, std::span<uint8_t> out);
/// Adds the n values `in` holds to acc (n = acc.size()).
void unpack_add(OuterDtype dtype, std::span<const uint8_t> in, std::span<float> acc);

}  // namespace strata::sharding
