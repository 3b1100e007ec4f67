#include "topology/errors.hpp"

#include "strata/error.hpp"

namespace strata::topo {

void fail(const std::string& what) {
  ErrorContext where;
  where.op = "topology";
  throw Error(ErrorCode::invalid_argument, where, what);
}

}  // namespace strata::topo
