// Training over islands: K replicas of one layout, each synchronous inside (its own mesh and
// ZeroEngine), that talk to each other only every H steps (DiLoCo, Douillard et al. 2023): the
// islands' parameter deltas since the last outer step are averaged and applied by an outer SGD
// with Nesterov momentum. docs/beyond-one-cluster.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
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
  /// The job's store (the world's): where islands agree on a loss and a new island joins.
  std::shared_ptr<Store> store;
};
/// Collective over `world`. Throws strata::Error(invalid_argument) when k is below 1 or does not
/// divide the world.
Islands split_islands(Communicator& world, int k);

/// The element type of the islands' exchange.
enum class OuterDtype : uint8_t {
  f32,   ///< an all-reduce of the float32 pseudo-gradients
  bf16,  ///< each island's rounded to bfloat16 (relative error at most 2^-9), all-gathered
  /// int8 with one float scale per 256 elements (the block's largest magnitude / 127: each value
  /// off by at most half a step), all-gathered. Every island averages the K unpacked copies in
  /// island order in float32, so all compute the same bits.
  int8,
};

struct DiLoCoOptions {
  int outer_every = 50;   ///< H: inner steps between a fragment's exchanges
  float lr = 0.7f;        ///< outer learning rate
  float momentum = 0.9f;  ///< Nesterov momentum in [0, 1); 0 is plain SGD
  /// Streaming DiLoCo (Douillard et al. 2025): the shard in F fragments of whole units (about
  /// equal in size), fragment f exchanged at the inner steps t with t = H - f H / F (mod H), its
  /// exchange running behind the next inner step and applied after it. 1: the whole shard at every
  /// H-th step, applied at once.
  int fragments = 1;
  OuterDtype dtype = OuterDtype::f32;
  /// Losing islands. Set to this island's whole group (every rank of its layout; the trainer's
  /// Islands::island), an exchange that fails because a rank of another island died is not an
  /// error: this island's ranks agree that it failed (one small all-reduce after every exchange),
  /// the islands' first ranks agree through the store which islands are left, `across` is rebuilt
  /// from them (Communicator::shrink) and the exchange is run again among them. A failure inside
  /// this island still throws. Empty: any failure throws, as a collective's does.
  Communicator island;
  /// How long the islands left wait for each other to agree (an island that neither checks in
  /// nor was seen failing is dropped when it passes).
  std::chrono::milliseconds agreement_timeout{60000};
  /// The job's store (Islands::store; for a joining island, the running job's store reached
  /// from outside: PrefixStore(TcpStore, "world")). Set with `island`: the islands agree there,
  /// and once every H steps (at a step with no exchange in flight) admit an island that asked
  /// to join (DiLoCo::join). Empty: agreements meet in `across`'s store and none may join. Keys
  /// live under "diloco/": one DiLoCo per job (else a PrefixStore each).
  std::shared_ptr<Store> job_store;
  /// How long DiLoCo::join waits to be admitted (up to H steps of the running islands).
  std::chrono::milliseconds join_timeout{600000};
};

/// What this rank's outer steps did.
struct OuterStats {
  int64_t outer_steps = 0;              ///< exchanges applied (one per fragment and period)
  std::vector<int64_t> fragment_syncs;  ///< the same, per fragment
  double bytes = 0;                     ///< moved over `across`, nccl-tests' bus sense
  double seconds = 0;                   ///< spent in outer steps: packing, waiting and the update
  std::vector<int> lost_islands;        ///< islands dropped (DiLoCoOptions::island), in that order
  std::vector<int> joined_islands;      ///< islands admitted (DiLoCo::join), in that order
};

/// What a checkpoint keeps of the outer optimizer on one rank: its shard (shard space) of the
/// snapshot and of the outer momentum, the same on every island, and the inner steps taken.
struct OuterState {
  std::vector<float> snapshot, momentum;
  int64_t inner_steps = 0;
};

/// DiLoCo's outer optimizer over a ZeroEngine. Each rank works on its engine's shard space
/// (ZeroEngine::shard_params), fragment by fragment: pseudo-gradient = snapshot - now, averaged
/// over `across`; momentum = mu momentum + it; new = snapshot - lr (it + mu momentum)
/// (torch.optim.SGD with nesterov); new becomes the snapshot and the engine's parameters (plus,
/// when streaming, what the inner step taken during the exchange changed). Snapshot and momentum
/// cost 8 bytes per owned parameter; the inner optimizer's state stays the island's.
class DiLoCo {
 public:
  /// Collective over `across`, then the engine's group: every island starts from island 0's
  /// parameters (across's rank 0), the first snapshot; sent only where a hash shows an island's
  /// differ (a trainer's islands start alike from one seed). Throws strata::Error(invalid_argument)
  /// naming an option out of range (fragments above the units or above H among them).
  DiLoCo(ZeroEngine& engine, Communicator across, DiLoCoOptions options = {});
  /// A new island joining a running job: `options.island` is its whole group (laid out as the
  /// running islands are), `options.job_store` the job's store. Asks to join, waits (up to
  /// join_timeout) until the running islands admit it, then receives from the first of them, rank
  /// by rank, its current parameters, snapshot and outer momentum and the inner step count, and
  /// from then on takes part in every exchange. The engine's AdamW moments start at zero, its
  /// step count at the running islands'. Collective over `options.island`.
  static std::unique_ptr<DiLoCo> join(ZeroEngine& engine, DiLoCoOptions options);
  /// Finishes an exchange still in flight (every island takes part in it) without applying it.
  ~DiLoCo();
  /// After every engine.step(): applies the exchange in flight, if any, then starts the
  /// fragments due at this step (applying them at once unless streaming). Collective over
  /// `across`, then the engine's group. Returns whether an exchange started.
  bool after_inner_step();
  /// Applies the exchange in flight now (before reading the parameters at the end of training).
  void flush();
  /// Collective over `across` (it flushes first, so that no exchange is in flight): this rank's
  /// outer state, for a checkpoint. With the engine's own state it is all an island resumes from.
  OuterState state();
  /// Replaces this rank's outer state with one state() returned under the same layout (after the
  /// constructor, with the engine's state loaded beside it). Throws strata::Error
  /// (invalid_argument) naming the sizes when the shard's differ.
  void set_state(OuterState s);
  /// Collective over the islands left: `values` averaged over them, element by element (an
  /// island lost meanwhile is dropped as in an exchange).
  void average_over_islands(std::span<double> values);
  /// The islands training now, by index (those at the start 0..K-1, joiners K, K+1, ...), in
  /// `across` order.
  const std::vector<int>& islands_left() const;
  /// This island's index (one of islands_left()).
  int island_index() const;
  /// Inner steps taken (a joiner counts from the running islands' count).
  int64_t inner_steps() const;
  /// Fragment f's engine units [first, last]. Throws strata::Error(invalid_argument) for an f
  /// outside 0..fragments-1.
  std::pair<size_t, size_t> fragment_units(int f) const;
  const OuterStats& stats() const;
  const DiLoCoOptions& options() const;

  struct Impl;

 private:
  explicit DiLoCo(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata
