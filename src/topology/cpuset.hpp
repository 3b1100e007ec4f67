// A set of CPUs by OS index. The public types carry CPU sets as Linux list strings ("0-3,8");
// this is the form they are compared in.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::topo {

class CpuSet {
 public:
  CpuSet() = default;
  /// Parses a list ("0-3,8,10-11"; empty = no CPU). Returns false on malformed text.
  static bool parse_list(std::string_view text, CpuSet& out);
  /// Parses a hex mask in Linux cpumask form ("000000ff,ffff0000,00ffffff": comma-separated
  /// 32-bit words, most significant first), as NCCL's topology files write affinities.
  static bool parse_mask(std::string_view text, CpuSet& out);
  /// The CPUs this process may run on (sched_getaffinity).
  static CpuSet affinity();

  void add(unsigned cpu);
  bool has(unsigned cpu) const;
  bool empty() const;
  unsigned count() const;
  bool intersects(const CpuSet& o) const;
  CpuSet operator&(const CpuSet& o) const;
  CpuSet& operator|=(const CpuSet& o);
  bool operator==(const CpuSet& o) const;
  /// Every member is also in `o`.
  bool subset_of(const CpuSet& o) const;
  /// The list form ("0-3,8"), empty string for no CPU.
  std::string to_list() const;

 private:
  void trim();
  std::vector<uint64_t> words_;
};

}  // namespace strata::topo
