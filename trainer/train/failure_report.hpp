// Which rank of the job a failure is about. A layout's rank waits in several groups (tp, pp, dp,
// the tied embedding's pair, the metrics): when one rank dies, the ranks sharing a group with it
// see its death, fail and exit, and a rank that shares no group with it sees one of them exit
// instead and would blame that neighbour. So every rank that fails on a peer reports, before it
// exits, the rank it saw die in world numbering through the job's store (first report wins), and
// every rank names the first report: all survivors name the rank that died. A failing rank then
// aborts its groups, so that ranks waiting on it learn at once while it (and, on rank 0, the
// store that holds the report) is still there; rank 0 waits up to 2 s for the others' reports
// before it exits.
//
// The store is served by rank 0, which waits up to 2 s for the others' reports when it fails
// itself, so a store found gone means rank 0 died: the rank then names rank 0.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "strata/communicator.hpp"
#include "strata/error.hpp"
#include "strata/store.hpp"

namespace gpt {

class FailureReport {
 public:
  FailureReport(std::shared_ptr<strata::Store> store, int world_rank, int world_size);

  /// A group this rank uses, by its communicator's name, with its members' world ranks in group
  /// order; `comm` (if given) is aborted when this rank fails on a peer.
  void add_group(const std::string& name, std::vector<int> world_ranks,
                 strata::Communicator comm = {});

  /// `e` restated for the job: for a peer failure or an abort, the first rank any rank reported
  /// dead (this rank's finding if it is the first), named by world rank as e.where().peer of
  /// group "world", after aborting this rank's groups; any other error unchanged.
  strata::Error attribute(const strata::Error& e);

 private:
  void abort_groups();

  std::shared_ptr<strata::Store> store_;
  int rank_, size_;
  std::map<std::string, std::vector<int>> groups_;
  std::vector<strata::Communicator> comms_;
};

}  // namespace gpt
