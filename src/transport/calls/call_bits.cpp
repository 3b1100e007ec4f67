#include "transport/calls/call_bits.hpp"

#include <array>

namespace strata::transport {
namespace {

// Indices are on the wire: append only.
constexpr std::array<std::string_view, 10> kKinds = {
    "all_reduce", "reduce_scatter", "all_gather", "all_to_all", "all_to_allv",
    "broadcast",  "reduce",         "gather",     "scatter",    "barrier"};
constexpr uint32_t kUnknownKind = 15, kNoReduce = 15, kAllToAllv = 4, kBarrier = 9;
static_assert(kKinds[kAllToAllv] == "all_to_allv" && kKinds[kBarrier] == "barrier");

}  // namespace

uint32_t call_bits(std::string_view op, DataType dt, int reduce) {
  uint32_t kind = kUnknownKind;
  for (uint32_t k = 0; k < kKinds.size(); ++k) {
    if (kKinds[k] == op) kind = k;
  }
  return kind << 8 | (uint32_t(dt) & 15) << 4 | (reduce < 0 ? kNoReduce : uint32_t(reduce) & 15);
}

std::string describe_call(uint32_t bits, int64_t count, int root) {
  const uint32_t kind = bits >> 8 & 15, dt = bits >> 4 & 15, reduce = bits & 15;
  if (kind == kBarrier) return "barrier()";  // no data
  std::string s(kind < kKinds.size() ? kKinds[kind] : "an unknown collective");
  s += '(';
  s += dt <= uint32_t(kLastDataType) ? dtype_name(DataType(dt)) : "?";
  // all_to_allv's count is its rank's own, different by design: not part of the call.
  if (count >= 0 && kind != kAllToAllv) s += " x " + std::to_string(count);
  if (reduce != kNoReduce) {
    s += ", ";
    s += reduce <= uint32_t(kLastReduceOp) ? op_name(ReduceOp(reduce)) : "?";
  }
  if (root >= 0) s += ", root " + std::to_string(root);
  return s + ")";
}

std::string describe_call(const Call& c) { return describe_call(c.bits, c.count, c.root); }

bool compatible(const Call& a, const Call& b) {
  if (a.bits != b.bits || a.root != b.root) return false;
  const bool counts_differ_by_design = (a.bits >> 8) == kAllToAllv;
  return counts_differ_by_design || a.count < 0 || b.count < 0 || a.count == b.count;
}

}  // namespace strata::transport
