#include "topology/cpuset.hpp"

#include <sched.h>

#include <algorithm>
#include <bit>
#include <charconv>

namespace strata::topo {
namespace {

bool parse_uint(std::string_view s, unsigned& v) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

std::string_view trim_spaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\n' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

}  // namespace

bool CpuSet::parse_list(std::string_view text, CpuSet& out) {
  out = CpuSet();
  text = trim_spaces(text);
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    size_t dash = item.find('-');
    unsigned lo = 0, hi = 0;
    if (dash == std::string_view::npos) {
      if (!parse_uint(item, lo)) return false;
      hi = lo;
    } else if (!parse_uint(item.substr(0, dash), lo) || !parse_uint(item.substr(dash + 1), hi) ||
               hi < lo) {
      return false;
    }
    if (hi > (1u << 20)) return false;  // no machine has a million CPUs; a typo does
    for (unsigned c = lo; c <= hi; ++c) out.add(c);
  }
  return true;
}

bool CpuSet::parse_mask(std::string_view text, CpuSet& out) {
  out = CpuSet();
  text = trim_spaces(text);
  if (text.starts_with("0x") || text.starts_with("0X")) text.remove_prefix(2);
  // Words are most significant first; walk them from the right.
  std::vector<std::string_view> words;
  while (true) {
    size_t comma = text.find(',');
    words.push_back(text.substr(0, comma));
    if (comma == std::string_view::npos) break;
    text = text.substr(comma + 1);
  }
  unsigned base = 0;
  for (auto w = words.rbegin(); w != words.rend(); ++w, base += 32) {
    if (w->empty() || w->size() > 8) return false;
    uint32_t v = 0;
    auto [p, ec] = std::from_chars(w->data(), w->data() + w->size(), v, 16);
    if (ec != std::errc() || p != w->data() + w->size()) return false;
    for (unsigned b = 0; b < 32; ++b)
      if (v >> b & 1u) out.add(base + b);
  }
  return true;
}

CpuSet CpuSet::affinity() {
  CpuSet s;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return s;
  for (unsigned c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) s.add(c);
  return s;
}

void CpuSet::add(unsigned cpu) {
  if (words_.size() <= cpu / 64) words_.resize(cpu / 64 + 1, 0);
  words_[cpu / 64] |= uint64_t(1) << (cpu % 64);
}

bool CpuSet::has(unsigned cpu) const {
  return cpu / 64 < words_.size() && (words_[cpu / 64] >> (cpu % 64) & 1u);
}

bool CpuSet::empty() const { return count() == 0; }

unsigned CpuSet::count() const {
  unsigned n = 0;
  for (uint64_t w : words_) n += unsigned(std::popcount(w));
  return n;
}

bool CpuSet::intersects(const CpuSet& o) const {
  size_t n = std::min(words_.size(), o.words_.size());
  for (size_t i = 0; i < n; ++i)
    if (words_[i] & o.words_[i]) return true;
  return false;
}

CpuSet CpuSet::operator&(const CpuSet& o) const {
  CpuSet r;
  r.words_.resize(std::min(words_.size(), o.words_.size()));
  for (size_t i = 0; i < r.words_.size(); ++i) r.words_[i] = words_[i] & o.words_[i];
  r.trim();
  return r;
}

CpuSet& CpuSet::operator|=(const CpuSet& o) {
  if (words_.size() < o.words_.size()) words_.resize(o.words_.size(), 0);
  for (size_t i = 0; i < o.words_.size(); ++i) words_[i] |= o.words_[i];
  return *this;
}

void CpuSet::trim() {
  while (!words_.empty() && words_.back() == 0) words_.pop_back();
}

bool CpuSet::operator==(const CpuSet& o) const {
  size_t n = std::max(words_.size(), o.words_.size());
  for (size_t i = 0; i < n; ++i) {
    uint64_t a = i < words_.size() ? words_[i] : 0, b = i < o.words_.size() ? o.words_[i] : 0;
    if (a != b) return false;
  }
  return true;
}

bool CpuSet::subset_of(const CpuSet& o) const { return (*this & o) == *this; }

std::string CpuSet::to_list() const {
  std::string out;
  const unsigned end = unsigned(words_.size() * 64);
  for (unsigned c = 0; c < end; ++c) {
    if (!has(c)) continue;
    unsigned last = c;
    while (last + 1 < end && has(last + 1)) ++last;
    if (!out.empty()) out += ',';
    out += std::to_string(c);
    if (last > c) out += '-' + std::to_string(last);
    c = last;
  }
  return out;
}

}  // namespace strata::topo
