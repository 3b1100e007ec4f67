// Reference figures of the node strata-perf runs on, printed in its header so that every table
// carries the conditions it was measured under.
#pragma once

#include <optional>
#include <string>

namespace perf {

/// Payload bandwidth of memcpy on 64 MiB buffers with `threads` threads copying at once: the
/// ceiling for intra-node figures.
double memcpy_gbps(int threads);

/// Median round trip, in ns, of one cache line bounced between threads pinned to the first two
/// CPUs this process may run on, and those CPUs' numbers ("cpu 0 <-> cpu 1"); nullopt with
/// fewer than two CPUs. Shared-memory collectives move every chunk between cores, so this is
/// their latency floor per transfer; on a virtual machine it also shows how far apart the host
/// has placed the vCPUs at that moment (it can move them during a run).
struct RoundTrip {
  double ns;
  std::string cpus;
};
std::optional<RoundTrip> core_round_trip();

}  // namespace perf
