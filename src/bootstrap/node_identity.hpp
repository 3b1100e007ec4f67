// Which node a rank runs on: hostname + kernel boot id (two containers on one host differ in
// hostname; two VMs with a cloned hostname differ in boot id), or STRATA_NODE_ID when set, which
// is how emulated clusters on one machine pretend to be several nodes.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "bootstrap/process_id.hpp"
#include "strata/error.hpp"
#include "strata/store.hpp"

namespace strata::bootstrap {

/// This process's node identity.
std::string node_identity();

struct NodeLayoutInfo {
  std::vector<int> node_of_rank;  ///< node index of every rank (numbered by their lowest rank)
  /// Ranks running on this machine's kernel (same boot id), whatever their node identity: the
  /// ranks that compete for these cores, also when STRATA_NODE_ID emulates several nodes here.
  /// At least the most any earlier group of this process counted.
  int ranks_on_my_kernel = 0;
  /// The CPUs those ranks may run on: the union of their affinity masks (at least that of any
  /// earlier group of this process). Fewer CPUs than ranks means they take turns on a core.
  int cpus_of_my_kernel = 0;
  bool oversubscribed() const { return ranks_on_my_kernel > cpus_of_my_kernel; }
  /// Every rank's process, so that peers on this machine can be watched for death.
  std::vector<ProcessId> process_of_rank;
  /// What every rank said of its links (a line the runtime writes and reads: runtime/group_view).
  std::vector<std::string> links_of_rank;
};

/// Collective over the ranks of `store`: where each of the `size` ranks runs, and its `links`
/// line. A rank that never publishes is named in the error (context `where`).
NodeLayoutInfo node_layout(Store& store, int rank, int size, const ErrorContext& where,
                           std::chrono::milliseconds timeout, const std::string& links = "");

}  // namespace strata::bootstrap
