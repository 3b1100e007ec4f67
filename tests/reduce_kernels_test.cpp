// Reduction kernels element by element against plain scalar loops.
#include "kernels/reduce_kernels.hpp"

#include <gtest/gtest.h>

#include <complex>
#include <cstdint>
#include <random>
#include <vector>

using namespace strata;

namespace {

template <typename T>
void check_integral(ReduceOp op) {
  std::mt19937 rng(42);
  const size_t n = 1037;  // not a multiple of any vector width
  std::vector<T> a(n), b(n), out(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = T(rng());
    b[i] = T(rng());
  }
  kernels::reduce(out.data(), a.data(), b.data(), n, dtype_of<T>(), op);
  for (size_t i = 0; i < n; ++i) {
    T want;
    switch (op) {
      // Wraparound, computed in uint64 where it is defined; the low bits are the same.
      case ReduceOp::sum:
      case ReduceOp::avg:
        want = T(uint64_t(a[i]) + uint64_t(b[i]));
        break;
      case ReduceOp::prod:
        want = T(uint64_t(a[i]) * uint64_t(b[i]));
        break;
      case ReduceOp::min:
        want = a[i] < b[i] ? a[i] : b[i];
        break;
      case ReduceOp::band:
        want = T(a[i] & b[i]);
        break;
      case ReduceOp::bor:
        want = T(a[i] | b[i]);
        break;
      case ReduceOp::bxor:
        want = T(a[i] ^ b[i]);
        break;
      default:
        want = a[i] < b[i] ? b[i] : a[i];
        break;
    }
    ASSERT_EQ(out[i], want) << "element " << i << " op " << op_name(op);
  }
}

template <typename T>
void check_floating(ReduceOp op) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> d(-100, 100);
  const size_t n = 1037;
  std::vector<T> a(n), b(n), out(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = T(d(rng));
    b[i] = T(d(rng));
  }
  kernels::reduce(out.data(), a.data(), b.data(), n, dtype_of<T>(), op);
  for (size_t i = 0; i < n; ++i) {
    T want = op == ReduceOp::prod  ? a[i] * b[i]
             : op == ReduceOp::min ? std::min(a[i], b[i])
             : op == ReduceOp::max ? std::max(a[i], b[i])
                                   : a[i] + b[i];
    ASSERT_EQ(out[i], want) << "element " << i;
  }
}

}  // namespace

TEST(ReduceKernels, IntegerTypesAllOps) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg,
                      ReduceOp::band, ReduceOp::bor, ReduceOp::bxor}) {
    check_integral<int8_t>(op);
    check_integral<uint8_t>(op);
    check_integral<int16_t>(op);
    check_integral<int32_t>(op);
    check_integral<int64_t>(op);
    check_integral<uint32_t>(op);
    check_integral<uint64_t>(op);
  }
}

TEST(ReduceKernels, BooleanIsLogical) {
  const std::vector<uint8_t> a = {0, 0, 1, 1}, b = {0, 1, 0, 1};
  const std::pair<ReduceOp, std::vector<uint8_t>> cases[] = {
      {ReduceOp::sum, {0, 1, 1, 1}},  {ReduceOp::max, {0, 1, 1, 1}}, {ReduceOp::bor, {0, 1, 1, 1}},
      {ReduceOp::prod, {0, 0, 0, 1}}, {ReduceOp::min, {0, 0, 0, 1}}, {ReduceOp::band, {0, 0, 0, 1}},
      {ReduceOp::bxor, {0, 1, 1, 0}}};
  for (const auto& [op, want] : cases) {
    std::vector<uint8_t> out(4);
    kernels::reduce(out.data(), a.data(), b.data(), 4, DataType::boolean, op);
    EXPECT_EQ(out, want) << op_name(op);
  }
}

TEST(ReduceKernels, ComplexSumProductAndAverage) {
  const std::vector<std::complex<double>> a = {{1, 2}, {-3, 0.5}}, b = {{4, -1}, {2, 2}};
  std::vector<std::complex<double>> out(2);
  kernels::reduce(out.data(), a.data(), b.data(), 2, DataType::c128, ReduceOp::prod);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(out[i], a[i] * b[i]) << i;
  std::vector<std::complex<float>> fa = {{1, 2}, {3, 4}}, fb = {{5, 6}, {7, 9}}, fo(2);
  kernels::reduce(fo.data(), fa.data(), fb.data(), 2, DataType::c64, ReduceOp::avg);
  kernels::divide_by(fo.data(), 2, DataType::c64, 2);
  EXPECT_EQ(fo[0], std::complex<float>(3, 4));
  EXPECT_EQ(fo[1], std::complex<float>(5, 6.5f));
}

TEST(ReduceKernels, SupportsSaysWhichPairsAreDefined) {
  EXPECT_FALSE(kernels::supports(DataType::f32, ReduceOp::band));
  EXPECT_FALSE(kernels::supports(DataType::bf16, ReduceOp::bxor));
  EXPECT_FALSE(kernels::supports(DataType::c64, ReduceOp::max));
  EXPECT_FALSE(kernels::supports(DataType::boolean, ReduceOp::avg));
  EXPECT_TRUE(kernels::supports(DataType::c128, ReduceOp::prod));
  EXPECT_TRUE(kernels::supports(DataType::u64, ReduceOp::bxor));
  EXPECT_TRUE(kernels::supports(DataType::boolean, ReduceOp::band));
}

TEST(ReduceKernels, UnsignedAverageUsesTheWholeRange) {
  std::vector<uint64_t> d = {~uint64_t(0) - 1, 10};
  kernels::divide_by(d.data(), 2, DataType::u64, 2);
  EXPECT_EQ(d[0], (~uint64_t(0) - 1) / 2);
  EXPECT_EQ(d[1], 5u);
}

TEST(ReduceKernels, FloatTypesAllOps) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max}) {
    check_floating<float>(op);
    check_floating<double>(op);
  }
}

TEST(ReduceKernels, HalfTypesRoundOnceThroughFloat) {
  const size_t n = 515;
  std::vector<f16_t> a(n), b(n), out(n);
  std::vector<bf16_t> c(n), d(n), out2(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = to_f16(float(i) * 0.37f - 50);
    b[i] = to_f16(float(i % 17) * 1.3f);
    c[i] = to_bf16(float(i) * 0.37f - 50);
    d[i] = to_bf16(float(i % 17) * 1.3f);
  }
  kernels::reduce(out.data(), a.data(), b.data(), n, DataType::f16, ReduceOp::sum);
  kernels::reduce(out2.data(), c.data(), d.data(), n, DataType::bf16, ReduceOp::max);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(out[i].bits, to_f16(to_float(a[i]) + to_float(b[i])).bits) << i;
    float m = std::max(to_float(c[i]), to_float(d[i]));
    ASSERT_EQ(to_float(out2[i]), m) << i;
  }
}

TEST(ReduceKernels, InPlaceAliasing) {
  std::vector<float> a = {1, 2, 3}, b = {10, 20, 30};
  kernels::reduce(a.data(), a.data(), b.data(), 3, DataType::f32, ReduceOp::sum);
  EXPECT_EQ(a, (std::vector<float>{11, 22, 33}));
}

TEST(ReduceKernels, DivideByTruncatesIntegersAndRoundsFloats) {
  std::vector<int32_t> i = {7, -7, 8};
  kernels::divide_by(i.data(), 3, DataType::i32, 2);
  EXPECT_EQ(i, (std::vector<int32_t>{3, -3, 4}));
  std::vector<uint8_t> u = {250, 9};
  kernels::divide_by(u.data(), 2, DataType::u8, 300);  // divisor wider than the type
  EXPECT_EQ(u, (std::vector<uint8_t>{0, 0}));
  std::vector<f16_t> h = {to_f16(3.0f)};
  kernels::divide_by(h.data(), 1, DataType::f16, 3);
  EXPECT_EQ(h[0].bits, to_f16(1.0f).bits);
}
