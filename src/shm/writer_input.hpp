// How this rank's input to a collective that only moves data (all-gather, all-to-all(v)) reaches
// its peers: staged chunk by chunk in its slot in the learned write mode; read where it lies,
// when it lies in a symmetric buffer (window.hpp); or copied by each reader straight out of this
// process (single copy, write_mode.hpp); or relayed, copied chunk by chunk to another buffer of
// this process (a broadcast root's output) and copied out of that by each reader. Unstaged, the
// input (or the relay's buffer) must stay as it is until every peer has read it, so the call
// returns only then (finish).
#pragma once

#include <optional>

#include "shm/collectives.hpp"
#include "shm/sync.hpp"

namespace strata::shm {

class WriterInput {
 public:
  /// `in`, of which the peers read `extent` bytes; the learned choice (`choices`) is timed per
  /// byte of `payload` (no `choices`: not learned, staged with ordinary stores unless the
  /// policy, STRATA_SHM_WRITE_MODE, forces another mode). `leader_single_copy`, when given, is
  /// whether the rank whose choice this collective follows left its input in its memory: then
  /// single copy is used (where possible) or not offered, instead of learned. `relay_to`: the
  /// input is relayed through that buffer (of `extent` bytes; single copy must be possible).
  WriterInput(Context& c, SizedWriteModeChoice* choices, const void* in, size_t extent,
              size_t payload, std::optional<bool> leader_single_copy = std::nullopt,
              uint8_t* relay_to = nullptr);
  bool staged() const { return !relay_ && stage_ && stage_->mode() != WriteMode::single_copy; }
  /// Staged: copies `k` bytes of the input, from `from`, to the staging buffer at `to`.
  /// Relayed: to the same place in the relay's buffer. Otherwise: nothing.
  void stage(void* to, const void* from, size_t k) const;
  /// Stamps and publishes chunk `chunk`, whose data starts `off` bytes into the input when
  /// unstaged (publish_written).
  void publish(uint64_t chunk, const Expect& e, size_t off) const;
  /// Ends the call: unstaged, waits until every peer has read the input; then times the
  /// operation for the learned choice.
  void finish();

 private:
  Context& c_;
  const uint8_t* in_;
  uint8_t* relay_;
  Windows::Found direct_;             // a symmetric buffer's part, or none (id 0)
  std::optional<StagingCopy> stage_;  // none when direct
};

}  // namespace strata::shm
