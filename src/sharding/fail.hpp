// One way for the sharding layer to report bad input: strata::Error naming the operation and rank.
#pragma once

#include <string>

#include "strata/error.hpp"

namespace strata::sharding {

[[noreturn]] inline void fail(const std::string& op, int rank, const std::string& what,
                              ErrorCode code = ErrorCode::invalid_argument) {
  ErrorContext where;
  where.rank = rank;
  where.op = op;
  throw Error(code, where, what);
}

}  // namespace strata::sharding
