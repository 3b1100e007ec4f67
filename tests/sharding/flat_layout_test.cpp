// The shard map: unit padding, block ownership, shard space and per-tensor views.
#include <gtest/gtest.h>

#include "strata/error.hpp"
#include "strata/sharding.hpp"

namespace {
using strata::FlatBuffer;
using strata::FlatLayout;
using strata::TensorSpec;

std::vector<TensorSpec> specs() {
  return {{"a.w", {3, 5}, 0}, {"a.b", {3}, 0}, {"b.w", {7}, 1}, {"c.w", {2, 2}, 2}};
}

TEST(FlatLayout, PadsEachUnitToAMultipleOfTheWorldSize) {
  FlatLayout l(specs(), 4);
  EXPECT_EQ(l.numel(), 15u + 3 + 7 + 4);
  ASSERT_EQ(l.num_units(), 3u);
  EXPECT_EQ(l.unit_real_numel(0), 18u);
  EXPECT_EQ(l.unit_numel(0), 20u);
  EXPECT_EQ(l.unit_numel(1), 8u);
  EXPECT_EQ(l.unit_numel(2), 4u);
  EXPECT_EQ(l.padded_numel(), 32u);
  EXPECT_EQ(l.shard_numel(), 8u);
  EXPECT_EQ(l.tensor_offset(1), 15u);
  EXPECT_EQ(l.tensor_offset(2), 20u);
  EXPECT_EQ(l.tensor_offset(3), 28u);
  EXPECT_EQ(l.unit_first_tensor(0), 0u);
  EXPECT_EQ(l.unit_last_tensor(0), 2u);
}

TEST(FlatLayout, RankOwnsBlockROfEveryUnitAndBlocksTileTheBuffer) {
  for (int n = 1; n <= 5; ++n) {
    FlatLayout l(specs(), n);
    std::vector<int> owner(l.padded_numel(), -1);
    size_t shard_total = 0;
    for (size_t u = 0; u < l.num_units(); ++u) {
      EXPECT_EQ(l.shard_offset(u), shard_total);
      shard_total += l.block_numel(u);
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < l.block_numel(u); ++i) {
          ASSERT_EQ(owner[l.block_offset(u, r) + i], -1);
          owner[l.block_offset(u, r) + i] = r;
        }
    }
    EXPECT_EQ(shard_total, l.shard_numel());
    for (int o : owner) EXPECT_GE(o, 0);
  }
}

TEST(FlatBuffer, ViewsAreDisjointAndPaddingStaysZero) {
  FlatBuffer f(FlatLayout(specs(), 3));
  for (size_t t = 0; t < f.layout().tensors().size(); ++t)
    for (float& x : f.view(t)) x = float(t + 1);
  size_t nonzero = 0;
  for (float x : f.data()) nonzero += x != 0.0f;
  EXPECT_EQ(nonzero, f.layout().numel());
  EXPECT_EQ(f.block(0, 2).size(), f.layout().block_numel(0));
  // Indices the layout lacks are refused by name, not read past the buffer.
  auto refusal = [](auto call) {
    try {
      call();
    } catch (const strata::Error& e) {
      EXPECT_EQ(e.code(), strata::ErrorCode::invalid_argument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(refusal([&] { f.view(4); }).find("tensor 4 of a layout of 4 tensors"),
            std::string::npos);
  EXPECT_NE(refusal([&] { f.block(3, 0); }).find("unit 3 and rank 0"), std::string::npos);
  EXPECT_NE(refusal([&] { f.block(0, 3); }).find("over 3 ranks"), std::string::npos);
  EXPECT_NE(refusal([&] { f.block(0, -1); }).find("rank -1"), std::string::npos);
}

TEST(FlatLayout, RejectsUnitsOutOfOrder) {
  std::vector<TensorSpec> bad = {{"x", {2}, 0}, {"y", {2}, 2}};
  EXPECT_THROW(FlatLayout(bad, 2), strata::Error);
  try {
    FlatLayout(bad, 2);
  } catch (const strata::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor y"), std::string::npos) << e.what();
  }
  EXPECT_THROW(FlatLayout(specs(), 0), strata::Error);
}
}  // namespace
