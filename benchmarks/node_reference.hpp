// Reference figures of the node strata-perf runs on, printed in its header so that every table
// carries the conditions it was measured under.
#pragma once

#include <optional>
#include <string>

namespace perf {

/// Payload bandwidth of memcpy on 64 MiB buffers with `threads` threads copying at once, one per
/// CPU of the node (also when the launcher bound this rank to one): the ceiling for intra-node
/// figures.
double memcpy_gbps(int threads);

/// The same with Strata's streaming-store copy, which writes around the cache: about what memory
/// moves when every core copies. A collective that must read and write every byte once from
/// memory (all-to-all of large buffers: n ranks' `bytes`) needs about n * bytes / this.
double streaming_copy_gbps(int threads);

/// Median round trip, in ns, of one cache line bounced between threads pinned to the first two
/// CPUs this process may run on (the node's first two when it is bound to one), and those CPUs'
/// numbers ("cpu 0 <-> cpu 1"); nullopt when there are not two to pin to. Shared-memory
/// collectives move every chunk between cores, so this is their latency floor per transfer; on a
/// virtual machine it also shows how far apart the host has placed the vCPUs at that moment (it
/// can move them during a run).
struct RoundTrip {
  double ns;
  std::string cpus;
};
std::optional<RoundTrip> core_round_trip();

}  // namespace perf
