// Numbers out of the JSON Strata's own tools write (strata-gpt --json, strata-perf --json): one
// key at a time, in the order the writer puts them, which is all the planner reads them for.
#pragma once

#include <cmath>
#include <cstdlib>
#include <string>

namespace plan {

/// `s` in the spacing the tools write: no white space outside strings but one space after each
/// colon and comma, so that a file re-saved by another writer (compact, indented) reads the same.
inline std::string canonical_json(const std::string& s) {
  std::string out;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    if (in_string) {
      out += ch;
      if (ch == '\\' && i + 1 < s.size())
        out += s[++i];
      else if (ch == '"')
        in_string = false;
    } else if (ch == '"') {
      in_string = true;
      out += ch;
    } else if (ch != ' ' && ch != '\n' && ch != '\t' && ch != '\r') {
      out += ch;
      if (ch == ':' || ch == ',') out += ' ';
    }
  }
  return out;
}

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
