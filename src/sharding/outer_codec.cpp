#include "sharding/outer_codec.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace strata::sharding {

namespace {

size_t blocks(size_t n) { return (n + kInt8Block - 1) / kInt8Block; }

}  // namespace

// int8: the blocks' scales first (floats, 4-byte aligned at the buffer's start), then the values.
size_t packed_bytes(OuterDtype dtype, size_t n) {
  if (dtype == OuterDtype::bf16) return n * sizeof(bf16_t);
  return blocks(n) * sizeof(float) + n;
}

void pack(OuterDtype dtype, std::span<const float> x, std::span<uint8_t> out) {
  if (dtype == OuterDtype::bf16) {
    for (size_t i = 0; i < x.size(); ++i) {
      const bf16_t v = to_bf16(x[i]);
      std::memcpy(out.data() + i * sizeof v, &v, sizeof v);
    }
    return;
  }
  const size_t nb = blocks(x.size());
  auto* q = reinterpret_cast<int8_t*>(out.data() + nb * sizeof(float));
  for (size_t b = 0; b < nb; ++b) {
    const size_t lo = b * kInt8Block, hi = std::min(x.size(), lo + kInt8Block);
    float big = 0;
    for (size_t i = lo; i < hi; ++i) big = std::max(big, std::fabs(x[i]));
    const float scale = big / 127.0f;
    std::memcpy(out.data() + b * sizeof(float), &scale, sizeof scale);
    for (size_t i = lo; i < hi; ++i)
      q[i] = scale > 0 ? int8_t(std::clamp(std::nearbyint(x[i] / scale), -127.0f, 127.0f)) : 0;
  }
}

void unpack_add(OuterDtype dtype, std::span<const uint8_t> in, std::span<float> acc) {
  if (dtype == OuterDtype::bf16) {
    for (size_t i = 0; i < acc.size(); ++i) {
      bf16_t v;
      std::memcpy(&v, in.data() + i * sizeof v, sizeof v);
      acc[i] += to_float(v);
    }
    return;
  }
  const size_t nb = blocks(acc.size());
  const auto* q = reinterpret_cast<const int8_t*>(in.data() + nb * sizeof(float));
  for (size_t b = 0; b < nb; ++b) {
    float scale;
    std::memcpy(&scale, in.data() + b * sizeof(float), sizeof scale);
    const size_t lo = b * kInt8Block, hi = std::min(acc.size(), lo + kInt8Block);
    for (size_t i = lo; i < hi; ++i) acc[i] += float(q[i]) * scale;
  }
}

}  // namespace strata::sharding
