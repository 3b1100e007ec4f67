// Shared helpers of the multi-process tests: the world communicator, test data with exactly
// representable reductions, an independent reference, and cross-rank agreement checks.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "strata/strata.hpp"

namespace mp {

/// The world communicator, created once in main().
strata::Communicator& world();

/// Bytes of `n` elements of `dt`.
inline std::vector<uint8_t> alloc(strata::DataType dt, size_t n) {
  return std::vector<uint8_t>(n * strata::dtype_size(dt));
}

inline strata::Buffer view(std::vector<uint8_t>& v, strata::DataType dt, size_t offset_elems = 0,
                           size_t count = SIZE_MAX) {
  size_t es = strata::dtype_size(dt);
  if (count == SIZE_MAX) count = v.size() / es - offset_elems;
  return strata::Buffer{v.data() + offset_elems * es, count, dt};
}

/// Period of the test data in the element index (prime).
constexpr size_t kPeriod = 65521;
/// Test value of element i on `rank`: a small integer in [-2, 2] ([0, 4] for u8), so that sums
/// and products over up to 8 ranks are exact in every dtype, f16 and bf16 included.
int64_t pattern(int rank, size_t i, int salt = 0);
/// Writes pattern(rank, first + k) for k < n as dtype `dt`.
void fill(void* dst, strata::DataType dt, size_t n, int rank, size_t first = 0, int salt = 0);
/// The expected reduction of pattern(*, i) over `nranks` ranks, written as dtype `dt`.
void reference_reduce(void* dst, strata::DataType dt, strata::ReduceOp op, size_t n, int nranks,
                      size_t first = 0, int salt = 0);
/// Compares element by element (bitwise); on mismatch returns a message naming the first bad
/// element and both values, else "".
std::string compare(const void* got, const void* want, strata::DataType dt, size_t n);
/// True when every rank of `comm` holds the same bytes (hash all-gathered and compared).
bool identical_on_all_ranks(strata::Communicator& comm, const void* data, size_t bytes);

/// Runs `call`, expects a strata::Error of `code` whose message contains every piece of `parts`.
template <typename F>
void expect_error(F call, strata::ErrorCode code, const std::vector<std::string>& parts) {
  try {
    call();
    ADD_FAILURE() << "no error thrown";
  } catch (const strata::Error& e) {
    EXPECT_EQ(int(e.code()), int(code)) << e.what();
    for (const auto& p : parts) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message lacks '" << p << "': " << e.what();
    }
  }
}

inline const std::vector<strata::DataType>& all_dtypes() {
  using strata::DataType;
  static const std::vector<DataType> v = {DataType::f32,  DataType::f64, DataType::f16,
                                          DataType::bf16, DataType::i8,  DataType::u8,
                                          DataType::i32,  DataType::i64};
  return v;
}
inline const std::vector<strata::ReduceOp>& all_ops() {
  using strata::ReduceOp;
  static const std::vector<ReduceOp> v = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min,
                                          ReduceOp::max, ReduceOp::avg};
  return v;
}
/// Per-rank element counts every collective is checked at (64 Mi runs separately, f32 only).
inline const std::vector<size_t>& small_counts() {
  static const std::vector<size_t> v = {0, 1, 7, size_t(1) << 20};
  return v;
}

}  // namespace mp
