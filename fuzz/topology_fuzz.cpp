// libFuzzer target: the topology readers that take text from files a person edits or a tool
// wrote (docs/topology.md): Strata's dump (JobTopology::from_xml), NCCL's topology XML, and the
// CPU list and mask forms. Malformed input must end in strata::Error, never a crash, a hang or
// another exception.
#include <cstdint>
#include <string>
#include <string_view>

#include "strata/error.hpp"
#include "strata/topology.hpp"
#include "topology/cpuset.hpp"
#include "topology/nccl_xml.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    strata::JobTopology::from_xml(text, "fuzz");
  } catch (const strata::Error&) {
  }
  try {
    strata::topo::load_nccl_xml(text, "fuzz");
  } catch (const strata::Error&) {
  }
  strata::topo::CpuSet set;
  if (strata::topo::CpuSet::parse_list(text, set)) {
    strata::topo::CpuSet back;
    if (!strata::topo::CpuSet::parse_list(set.to_list(), back) || !(back == set)) __builtin_trap();
  }
  strata::topo::CpuSet::parse_mask(text, set);
  return 0;
}
