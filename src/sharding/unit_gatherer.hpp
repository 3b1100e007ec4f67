// Stage 3: gathers whole units of parameters just in time from every rank's shard, keeps the next
// `depth` gathers of the current pass in flight, and frees each unit after use.
#pragma once

#include <functional>
#include <span>
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
  /// does the last unit released in a forward pass, which backward gathers first.
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
  size_t kept_ = kNone;  // released at the end of forward, kept for backward
  std::vector<bool> resident_;
  std::vector<State> state_;
  std::vector<std::vector<float>> full_;
  std::vector<Work> work_;
  size_t live_ = 0, peak_live_ = 0;
  std::vector<GatherEvent> events_;
  StepStats stats_;
};

}  // namespace strata::sharding
