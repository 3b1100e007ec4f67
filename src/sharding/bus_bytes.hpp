// Bytes a collective moves per rank in nccl-tests' "bus" sense, so that bus_bytes / seconds is
// comparable with the link's bandwidth whatever the collective and the group size.
#pragma once

#include <cstddef>

namespace strata::sharding {

/// All-reduce of `bytes` per rank: 2(n-1)/n x bytes.
inline double all_reduce_bus_bytes(size_t bytes, int n) {
  return n > 1 ? 2.0 * (n - 1) / n * double(bytes) : 0.0;
}
/// All-gather, reduce-scatter or all-to-all whose full (gathered) buffer is `total` bytes:
/// (n-1)/n x total.
inline double gather_bus_bytes(size_t total, int n) {
  return n > 1 ? double(n - 1) / n * double(total) : 0.0;
}

}  // namespace strata::sharding
