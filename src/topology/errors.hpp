// How topology code reports bad input: strata::Error(invalid_argument) for the "topology"
// operation, the message naming the file (or blob) and what was wrong.
#pragma once

#include <string>

namespace strata::topo {

[[noreturn]] void fail(const std::string& what);

}  // namespace strata::topo
