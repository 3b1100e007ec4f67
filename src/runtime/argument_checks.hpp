// Argument checks shared by every operation. Each throws strata::Error(invalid_argument) with the
// caller's context (rank, group, op, seq, peer) before any byte moves.
#pragma once

#include <cstddef>
#include <string>

#include "strata/error.hpp"
#include "strata/types.hpp"

namespace strata::runtime {

class Checker {
 public:
  explicit Checker(ErrorContext where) : where_(std::move(where)) {}

  /// The buffer is usable: host memory (the device path is not in this build), valid dtype,
  /// and not null unless empty.
  void buffer(const Buffer& b, const char* what) const;
  void same_dtype(const Buffer& a, const Buffer& b) const;
  void count(const Buffer& b, size_t expected, const char* what, const std::string& why) const;
  void peer(int peer, int size, const char* what) const;
  void reduce_op(DataType dt, ReduceOp op) const;
  /// Out-of-place buffers must not overlap, except when `in_place` (the NCCL in-place pattern).
  void no_overlap(const Buffer& in, const Buffer& out, bool in_place) const;
  [[noreturn]] void fail(const std::string& what) const;

 private:
  ErrorContext where_;
};

}  // namespace strata::runtime
