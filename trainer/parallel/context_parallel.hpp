// Context parallelism (docs/trainer.md, "Context parallelism"): the sequence split over the cp
// group, each rank holding chunks r and 2 cp - 1 - r of 2 cp (ContextSplit::position), and causal
// attention computed over the whole sequence in one of two ways:
//   - p2p, ring attention (ring_attention.cpp): the keys and values go around the ring, the next
//     block's send/recv overlapping this block's attention; an online softmax merges the blocks
//     exactly (flash attention's running max and sum), keeping only each row's log-sum-exp; the
//     backward recomputes the probabilities and passes the keys' and values' gradients around
//     the ring after them, home at the end;
//   - a2a, Ulysses (ulysses_attention.cpp): an all-to-all turns the sequence split into a head
//     split (every position, NH / cp heads), attention runs whole, and a second all-to-all turns
//     it back; the backward mirrors both. The heads must divide by cp.
#pragma once

#include <memory>
#include <string_view>
#include <utility>

#include "model/model_parallel.hpp"
#include "strata/communicator.hpp"

namespace gpt {

enum class CpComm { p2p, a2a };
/// "p2p" or "a2a"; throws std::invalid_argument naming anything else.
CpComm parse_cp_comm(std::string_view name);
std::string_view cp_comm_name(CpComm c);

class ContextParallel : public ContextSplit {
 public:
  explicit ContextParallel(strata::Communicator cp) : cp_(std::move(cp)) {}
  int size() const override { return cp_.size(); }
  int rank() const override { return cp_.rank(); }
  /// Bytes this rank sent to other ranks and seconds spent in attention's communication (the
  /// part not hidden behind computation), since the last call.
  double take_bytes() { return std::exchange(bytes_, 0.0); }
  double take_seconds() { return std::exchange(seconds_, 0.0); }
  /// Blocking, and not in take_bytes(): routing's per-sequence sums, not attention's traffic.
  void sum(std::span<double> v) override;
  void all_gather(std::span<const float> mine, std::span<float> all) override;

 protected:
  strata::Communicator cp_;
  double bytes_ = 0, seconds_ = 0;
};

/// The cp group's attention in `mode`.
std::unique_ptr<ContextParallel> make_context_parallel(strata::Communicator cp, CpComm mode);
std::unique_ptr<ContextParallel> make_ring_attention(strata::Communicator cp);
std::unique_ptr<ContextParallel> make_ulysses_attention(strata::Communicator cp);

}  // namespace gpt
