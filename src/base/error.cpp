#include "strata/error.hpp"

#include <sstream>

namespace strata {
namespace {
std::string format(const ErrorContext& w, const std::string& what) {
  std::ostringstream s;
  s << "strata: " << (w.op.empty() ? "operation" : w.op) << " failed";
  if (w.rank >= 0) s << " on rank " << w.rank;
  if (!w.group.empty()) s << " of group " << w.group;
  if (w.seq >= 0 || w.peer >= 0) {
    s << " (";
    if (w.seq >= 0) s << "seq " << w.seq;
    if (w.seq >= 0 && w.peer >= 0) s << ", ";
    if (w.peer >= 0) s << "peer " << w.peer;
    s << ")";
  }
  s << ": " << what;
  return s.str();
}
}  // namespace

Error::Error(ErrorCode code, const ErrorContext& where, const std::string& what)
    : std::runtime_error(format(where, what)), code_(code), where_(where) {}

}  // namespace strata
