// Numbers out of the JSON Strata's own tools write (strata-gpt --json, strata-perf --json): one
// key at a time, in the order the writer puts them, which is all the planner reads them for.
#pragma once

#include <cmath>
#include <cstdlib>
#include <string>

namespace plan {

/// The number after the next `"key": ` at or after `at` (moving `at` past it); NaN when the key
/// is absent before `end` or its value is not a number (null).
inline double number_after(const std::string& s, size_t& at, const std::string& key, size_t end) {
  const size_t k = s.find("\"" + key + "\": ", at);
  if (k == std::string::npos || k >= end) return std::nan("");
  at = k + key.size() + 4;
  char* stop = nullptr;
  const double v = std::strtod(s.c_str() + at, &stop);
  return stop == s.c_str() + at ? std::nan("") : v;
}

}  // namespace plan
