// Stage 3: gathers whole units of parameters just in time from every rank's shard, keeps the next
// `depth` gathers of the current pass in flight, and frees each unit after use.
//
// "Next" is the order this kind of pass read its units in last time (as FSDP records its
// execution order): a pass is known by its direction and its first unit, since a rank's pipeline
// chunks each have their own. A model that reads a unit out of order (a head's tied embedding)
// or skips one (an embedding's backward reads no parameters) then prefetches what it reads next
// and nothing else; by unit number, it gathered units it would not read. The first pass of a
// kind, or one that departs from its order, prefetches the next units by number (the order
// ZeroEngine documents) and records its own order for the next.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "strata/sharding.hpp"

namespace strata::sharding {

class UnitGatherer {
 public:
  /// Copies this rank's block of unit u's parameters (block_numel(u) floats) to `dst`: from the
  /// engine's shard, or from the file the shard is offloaded to.
  using BlockReader = std::function<void(size_t u, float* dst)>;
  UnitGatherer(Communicator comm, const FlatLayout& layout, BlockReader own_block, int depth,
               size_t resident_below_bytes);
  /// Waits for the gathers still in flight (a pass's last prefetch): every rank takes part in
  /// them, and they write into this gatherer's buffers.
  ~UnitGatherer();

  /// The direction of the current pass: forward prefetches higher units, backward lower ones.
  void set_forward(bool forward);
  /// Returns once unit u is gathered; issues the prefetches of the window after it.
  void gather(size_t u);
  /// Frees unit u (waiting first if its gather is still in flight); resident units stay, and so
  /// do units released at the end of a forward pass that backward gathers first: the last unit,
  /// and one a recorded backward pass starts with, at its last read in a recorded forward.
  void release(size_t u);
  /// Unit u's gathered parameters; throws unless gather(u) returned and release(u) did not run.
  std::span<const float> unit(size_t u, const char* what) const;
  /// The shard changed (optimizer step): every gathered copy is stale.
  void invalidate();

  bool resident(size_t u) const { return resident_[u]; }
  size_t resident_bytes() const;
  size_t peak_live_bytes() const { return peak_live_; }
  const std::vector<GatherEvent>& events() const { return events_; }
  /// Timing since the last call.
  StepStats take_stats();

 private:
  enum class State { absent, in_flight, ready };
  /// The unit `k` reads after the one just read in this pass, or kNone.
  size_t ahead(size_t u, int k) const;
  void end_pass();  // records the pass's order
  void issue(size_t u, GatherEvent::Kind kind);
  void wait(size_t u);
  void drop(size_t u);  // frees a non-resident unit now
  void note(GatherEvent::Kind kind, size_t u) { events_.push_back({kind, u, live_}); }

  Communicator comm_;
  const FlatLayout& layout_;
  BlockReader own_block_;
  int depth_;
  bool forward_ = true;
  static constexpr size_t kNone = size_t(-1);
  bool kept(size_t u) const { return std::find(kept_.begin(), kept_.end(), u) != kept_.end(); }
  std::vector<size_t> kept_;  // released at the end of forward, kept for backward
  std::map<std::pair<bool, size_t>, std::vector<size_t>> orders_;  // by direction, first unit
  std::vector<size_t> reads_;                                      // this pass's so far
  const std::vector<size_t>* follow_ = nullptr;  // its recorded order, while it keeps to it
  std::vector<bool> resident_;
  std::vector<State> state_;
  std::vector<std::vector<float>> full_;
  std::vector<Work> work_;
  size_t live_ = 0, peak_live_ = 0;
  std::vector<GatherEvent> events_;
  StepStats stats_;
};

}  // namespace strata::sharding
