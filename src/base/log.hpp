// Logging by subsystem (INIT, COLL, NET, STORE, ...), filtered by STRATA_DEBUG.
// Usage: STRATA_LOG(WARN, "STORE") << "refused connection from " << addr;
#pragma once

#include <sstream>

namespace strata::log {

enum class Level : int { NONE = 0, WARN = 1, INFO = 2, TRACE = 3 };

/// The level set by STRATA_DEBUG (NONE, WARN, INFO, TRACE; default WARN), read once.
Level level();
inline bool enabled(Level l) { return static_cast<int>(l) <= static_cast<int>(level()); }

/// Sets this process's rank for the log prefix ("[strata r3 STORE] ...").
void set_rank(int rank);

/// One log line, written to stderr in one piece when it goes out of scope.
class Line {
 public:
  Line(Level level, const char* subsystem);
  ~Line();
  template <typename T>
  Line& operator<<(const T& v) {
    out_ << v;
    return *this;
  }

 private:
  std::ostringstream out_;
};

}  // namespace strata::log

#define STRATA_LOG(LEVEL, SUBSYS)                             \
  if (!::strata::log::enabled(::strata::log::Level::LEVEL)) { \
  } else                                                      \
    ::strata::log::Line(::strata::log::Level::LEVEL, SUBSYS)
