// Training over islands: K replicas of one layout, each synchronous inside (its own mesh and
// ZeroEngine), that talk to each other only every H steps (DiLoCo, Douillard et al. 2023): the
// islands' parameter deltas since the last outer step are averaged and applied by an outer SGD
// with Nesterov momentum. docs/beyond-one-cluster.md.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/communicator.hpp"
#include "strata/sharding.hpp"

namespace strata {

/// A job's ranks as `count` islands of world / count consecutive ranks: the slowest axis, after
/// the mesh's pp, so an island is whole nodes (or one site of an emulated cluster).
struct Islands {
  int count = 1, index = 0;
  Communicator island;  ///< this island's ranks: the world its mesh is built on
  Communicator across;  ///< the rank at this rank's place in every island (`count` ranks)
};
/// Collective over `world`. Throws strata::Error(invalid_argument) when k is below 1 or does not
/// divide the world.
Islands split_islands(Communicator& world, int k);

struct DiLoCoOptions {
  int outer_every = 50;   ///< H: inner steps between outer steps
  float lr = 0.7f;        ///< outer learning rate
  float momentum = 0.9f;  ///< Nesterov momentum in [0, 1); 0 is plain SGD
};

/// What this rank's outer steps did.
struct OuterStats {
  int64_t outer_steps = 0;
  double bytes = 0;    ///< moved over `across` by its all-reduces, nccl-tests' bus sense
  double seconds = 0;  ///< spent in outer steps: the exchange and the update
};

/// DiLoCo's outer optimizer over a ZeroEngine. Each rank works on its engine's shard space
/// (ZeroEngine::shard_params): pseudo-gradient = snapshot - now, averaged over `across`;
/// momentum = mu momentum + it; new = snapshot - lr (it + mu momentum) (torch.optim.SGD with
/// nesterov); new becomes the snapshot and the engine's parameters on every replica. The snapshot
/// and momentum cost 8 bytes per owned parameter; the inner optimizer's state stays the island's.
class DiLoCo {
 public:
  /// Collective over `across`, then the engine's group: every island starts from island 0's
  /// parameters (across's rank 0), the first snapshot. Throws strata::Error(invalid_argument)
  /// naming an option out of range.
  DiLoCo(ZeroEngine& engine, Communicator across, DiLoCoOptions options = {});
  /// After every engine.step(): the H-th call since the last outer step runs one (collective over
  /// `across`, then the engine's group) and returns true.
  bool after_inner_step();
  /// The outer step now, whatever the count.
  void outer_step();
  const OuterStats& stats() const { return stats_; }
  const DiLoCoOptions& options() const { return options_; }

 private:
  ZeroEngine& engine_;
  Communicator across_;
  DiLoCoOptions options_;
  std::vector<float> snapshot_, momentum_;
  int inner_ = 0;  // inner steps since the last outer step
  OuterStats stats_;
};

}  // namespace strata
