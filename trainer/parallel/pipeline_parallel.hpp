// Pipeline parallelism: the plumbing between the stages of one pipeline. Rank r of the pp group
// holds virtual stages r, r + p, ... (one per model chunk; one chunk unless interleaved); the
// schedule (pipeline_schedule.hpp) says which forward or backward runs next, and this class moves
// activations forward and their gradients backward by send/recv.
//
// Every send is asynchronous (from a copy, so the model's buffers are free at once) and every
// receive blocks right before the pass that needs it: with the schedules' order this cannot
// deadlock (tests/trainer/pipeline_schedule_test.cpp simulates exactly these rules). Forward and
// backward messages use distinct tags per receiving chunk, so with p = 2, where the previous and
// the next stage are the same rank, they never match each other; within one tag they match in
// issue order, which is micro-batch order on both sides.
#pragma once

#include <span>
#include <vector>

#include "parallel/pipeline_schedule.hpp"
#include "strata/communicator.hpp"

namespace gpt {

class Pipeline {
 public:
  /// No communication: `pp` is the pipeline's group (rank = stage). Throws
  /// std::invalid_argument for a schedule that does not accept (p, m, v).
  Pipeline(strata::Communicator pp, pp::Schedule schedule, int micro_batches, int chunks);

  int stages() const { return p_; }
  int rank() const { return group_.rank(); }
  int chunks() const { return v_; }
  int micro_batches() const { return m_; }
  pp::Schedule schedule() const { return schedule_; }
  /// This rank's actions in one optimizer step.
  const std::vector<pp::Action>& actions() const { return actions_; }
  /// Virtual stage of this rank's chunk c, and whether it is the model's first or last.
  int virtual_stage(int chunk) const { return chunk * p_ + rank(); }
  bool first(int chunk) const { return virtual_stage(chunk) == 0; }
  bool last(int chunk) const { return virtual_stage(chunk) == p_ * v_ - 1; }
  /// Most micro-batches of chunk c whose activations this rank holds at once; micro-batch k
  /// uses slot k % slots(c).
  int slots(int chunk) const { return slots_[size_t(chunk)]; }

  /// From virtual stage vs - 1 into `into` (blocking) / to vs + 1 (asynchronous).
  void recv_activation(int chunk, std::span<float> into);
  void send_activation(int chunk, std::span<const float> from);
  /// From virtual stage vs + 1 (blocking) / to vs - 1 (asynchronous).
  void recv_gradient(int chunk, std::span<float> into);
  void send_gradient(int chunk, std::span<const float> from);
  /// Waits for every send of the step (before the next one reuses the buffers).
  void finish_sends();

  /// Seconds blocked in receives and payload bytes sent since the last take_stats().
  struct Stats {
    double recv_wait_seconds = 0;
    double bytes_sent = 0;
  };
  Stats take_stats();

 private:
  enum Kind { forward = 0, backward = 1 };
  void send(Kind k, int to_vs, std::span<const float> from);
  void recv(Kind k, int from_vs, int my_chunk, std::span<float> into);

  strata::Communicator group_;
  pp::Schedule schedule_;
  int p_, m_, v_;
  std::vector<pp::Action> actions_;
  std::vector<int> slots_;
  struct InFlight {
    strata::Work work;
    std::vector<float> data;
  };
  std::vector<InFlight> sends_;
  std::vector<std::vector<float>> spare_;  // buffers of finished sends, reused
  Stats stats_;
};

}  // namespace gpt
