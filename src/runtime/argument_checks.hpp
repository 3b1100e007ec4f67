// Argument checks shared by every operation. Each throws strata::Error(invalid_argument) with the
// caller's context (rank, group, op, seq, peer) before any byte moves. The context is assembled
// only when a check fails: its strings would cost a small call more than the checks themselves.
#pragma once

#include <cstddef>
#include <string>

#include "strata/error.hpp"
#include "strata/types.hpp"

namespace strata::runtime {

class Checker {
 public:
  /// `group` must outlive the checker (it is the communicator's name).
  Checker(int rank, const std::string& group, const char* op, int64_t seq, int peer = -1)
      : rank_(rank), group_(group), op_(op), seq_(seq), peer_(peer) {}

  /// The buffer is usable: host memory (the device path is not in this build), valid dtype,
  /// not null unless empty, and its bytes (count times its element's size) within the address
  /// space.
  void buffer(const Buffer& b, const char* what) const;
  /// `b.count` times `n` (the group's size), after buffer(b): refused where the product, in
  /// bytes, would leave the address space (a wrapped product could pass a count check).
  size_t times(const Buffer& b, int n, const char* what) const;
  void same_dtype(const Buffer& a, const Buffer& b) const;
  void count(const Buffer& b, size_t expected, const char* what, const char* why) const;
  void peer(int peer, int size, const char* what) const;
  void reduce_op(DataType dt, ReduceOp op) const;
  /// Out-of-place buffers must not overlap, except when `in_place` (the NCCL in-place pattern).
  void no_overlap(const Buffer& in, const Buffer& out, bool in_place) const;
  [[noreturn]] void fail(const std::string& what) const;

 private:
  int rank_;
  const std::string& group_;
  const char* op_;
  int64_t seq_;
  int peer_;
};

}  // namespace strata::runtime
