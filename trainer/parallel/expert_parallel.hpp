// Expert parallelism (docs/trainer.md, "Mixture of experts"): each rank of the ep group holds
// E / ep of a mixture-of-experts block's experts; a block's rows travel to the ranks of their
// experts and back by all_to_allv over the group, the counts first by all_to_all (as Megatron's
// all-to-all token dispatcher does). The MoE layer (model/moe.hpp) sees only its Exchange.
//
// The dense (replicated) parameters see different tokens on each rank of the group, so their
// gradients are averaged over it (average_dense) before the dp engine averages them over dp:
// together, over dp x ep. Expert gradients already hold every rank's tokens (their backward
// brought them home), summed; the trainer scales them by 1 / ep, as Megatron does.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "model/moe.hpp"
#include "strata/communicator.hpp"

namespace gpt {

class ExpertParallel final : public moe::Exchange {
 public:
  /// `ep`: the ranks that share the experts (the same group on every rank of it).
  explicit ExpertParallel(strata::Communicator ep);
  int size() const override { return ep_.size(); }
  int rank() const { return ep_.rank(); }
  void counts(const std::vector<int32_t>& mine, std::vector<int32_t>& theirs) override;
  void rows(const float* send, const std::vector<size_t>& send_rows, float* recv,
            const std::vector<size_t>& recv_rows, int width) override;
  /// Starts averaging `grads` over the group in the background (one all-reduce of them packed);
  /// finish_average() waits for it and writes the averages back. One at a time.
  void start_average(const std::vector<std::span<float>>& grads);
  void finish_average();
  bool averaging() const { return work_.has_value(); }

  /// Bytes this rank sent to other ranks (rows and counts), and seconds in the exchanges, since
  /// the last take: read, or read and reset.
  double sent_bytes() const { return bytes_; }
  double exchange_seconds() const { return seconds_; }
  double take_bytes();
  double take_seconds();
  /// The averages' bytes since the last call, nccl-tests' bus sense, and the seconds
  /// finish_average() waited for them.
  double take_average_bus_bytes();
  double take_average_wait_seconds();

 private:
  strata::Communicator ep_;
  std::vector<size_t> sc_, sd_, rc_, rd_;  // all_to_allv's arguments, in floats
  double bytes_ = 0, seconds_ = 0, average_bytes_ = 0, average_wait_ = 0;
  std::vector<float> packed_;               // the average in flight
  std::vector<std::span<float>> averaged_;  // where it goes back
  std::optional<strata::Work> work_;
};

}  // namespace gpt
