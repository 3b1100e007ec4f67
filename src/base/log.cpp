#include "base/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace strata::log {
namespace {
std::atomic<int> g_rank{-1};

Level parse_level() {
  const char* v = std::getenv("STRATA_DEBUG");
  if (!v || !*v) return Level::WARN;
  std::string s(v);
  if (s == "NONE" || s == "0") return Level::NONE;
  if (s == "INFO") return Level::INFO;
  if (s == "TRACE") return Level::TRACE;
  return Level::WARN;
}
}  // namespace

Level level() {
  static const Level l = parse_level();
  return l;
}

void set_rank(int rank) { g_rank.store(rank); }

Line::Line(Level level, const char* subsystem) {
  const char* tag = level == Level::WARN ? "WARN " : level == Level::INFO ? "" : "TRACE ";
  out_ << "[strata";
  int r = g_rank.load();
  if (r >= 0) out_ << " r" << r;
  out_ << " pid " << ::getpid() << " " << subsystem << "] " << tag;
}

Line::~Line() {
  out_ << '\n';
  std::string s = out_.str();
  // One write() so lines from several threads and ranks do not interleave.
  ssize_t ignored = ::write(2, s.data(), s.size());
  (void)ignored;
}

}  // namespace strata::log
