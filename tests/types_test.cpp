// 16-bit float conversions against values worked out by hand from the IEEE / bfloat16 formats.
#include "strata/types.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace strata;

TEST(Types, SizesAndNames) {
  EXPECT_EQ(dtype_size(DataType::f32), 4u);
  EXPECT_EQ(dtype_size(DataType::f64), 8u);
  EXPECT_EQ(dtype_size(DataType::f16), 2u);
  EXPECT_EQ(dtype_size(DataType::bf16), 2u);
  EXPECT_EQ(dtype_size(DataType::i8), 1u);
  EXPECT_EQ(dtype_size(DataType::u8), 1u);
  EXPECT_EQ(dtype_size(DataType::i32), 4u);
  EXPECT_EQ(dtype_size(DataType::i64), 8u);
  EXPECT_EQ(dtype_name(DataType::bf16), "bf16");
  EXPECT_EQ(op_name(ReduceOp::avg), "avg");
}

TEST(Types, F16KnownBitPatterns) {
  EXPECT_EQ(to_f16(1.0f).bits, 0x3c00);
  EXPECT_EQ(to_f16(-2.0f).bits, 0xc000);
  EXPECT_EQ(to_f16(65504.0f).bits, 0x7bff);       // largest finite
  EXPECT_EQ(to_f16(1e6f).bits, 0x7c00);           // overflow -> inf
  EXPECT_EQ(to_f16(5.9604645e-8f).bits, 0x0001);  // smallest subnormal
  EXPECT_FLOAT_EQ(to_float(f16_t{0x3555}), 0.33325195f);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even -> 1.
  EXPECT_EQ(to_f16(1.0f + std::ldexp(1.0f, -11)).bits, 0x3c00);
  // Rounding up (a truncating conversion would give 0x3c01 and 0x3c00): 1 + 3 * 2^-11 is a tie
  // between 0x3c01 and 0x3c02, to even; 1 + 2^-11 + 2^-20 lies just above the first tie.
  EXPECT_EQ(to_f16(1.0f + 3 * std::ldexp(1.0f, -11)).bits, 0x3c02);
  EXPECT_EQ(to_f16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)).bits, 0x3c01);
}

TEST(Types, Bf16KnownBitPatterns) {
  EXPECT_EQ(to_bf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(to_bf16(-2.0f).bits, 0xc000);
  EXPECT_FLOAT_EQ(to_float(bf16_t{0x4049}), 3.140625f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even -> 1; 1 + 3*2^-8 rounds up.
  EXPECT_EQ(to_bf16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);
  EXPECT_EQ(to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3f82);
  EXPECT_TRUE(std::isnan(to_float(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Types, EveryF16RoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    f16_t h{uint16_t(b)};
    float f = to_float(h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(to_f16(f).bits, h.bits) << "bits " << b;
  }
}

TEST(Types, BufferDeducesDtype) {
  std::vector<bf16_t> v(5);
  Buffer b = buffer(v);
  EXPECT_EQ(b.dtype, DataType::bf16);
  EXPECT_EQ(b.count, 5u);
  EXPECT_EQ(b.bytes(), 10u);
  EXPECT_EQ(b.data, v.data());
}
