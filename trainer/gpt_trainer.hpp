// Training the reference GPT through Strata: one Trainer per data-parallel group, parameters and
// optimizer state in a strata::ZeroEngine (stage 0 = DDP with bucketed all-reduce, 1-3 = ZeRO),
// each rank computing its slice of every global batch.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "char_data.hpp"
#include "gpt_model.hpp"
#include "strata/sharding.hpp"

namespace gpt {

struct TrainOptions {
  Config model;
  uint64_t seed = 1337;       ///< initialisation and data order
  int stage = 0;              ///< ZeRO stage: 0 (DDP) .. 3
  int global_batch = 32;      ///< sequences per step, over all ranks; divides by ranks * micro
  int micro_batches = 1;      ///< gradient accumulation: micro-batches per rank per step
  int steps = 200;
  float lr = 3e-3f, min_lr = 3e-4f, weight_decay = 0.1f, max_grad_norm = 1.0f;
  int warmup = 20;            ///< linear warm-up steps, then cosine decay to min_lr at `steps`
  bool recompute = false;     ///< activation checkpointing
  int prefetch = 1;           ///< stage 3 prefetch depth
  size_t bucket_bytes = 1u << 20;  ///< gradient bucket cap (the model is small)
};

/// The job's communicator under mpirun, torchrun or strata-run; run without a launcher, a group
/// of one rank (so `strata-gpt train` works as a plain command).
strata::Communicator job_communicator();

/// The learning rate of step s (0-based): linear warm-up to lr, cosine decay to min_lr.
float learning_rate(const TrainOptions& o, int step);

/// What one optimizer step measured (loss averaged over the global batch).
struct StepReport {
  int step = 0;
  float loss = 0, lr = 0;
  double seconds = 0, comm_seconds = 0, exposed_seconds = 0;
  double bus_bytes = 0;  ///< bytes the step's collectives moved per rank, nccl-tests "bus" sense
};

class Trainer {
 public:
  /// Collective over `dp`. Throws std::invalid_argument when the batch does not divide.
  Trainer(strata::Communicator dp, const CharCorpus& data, TrainOptions o);
  ~Trainer();

  /// Runs the next optimizer step (steps_done() is its index).
  StepReport step();
  /// Mean validation loss over `batches` global batches (collective).
  float evaluate(int batches);
  int steps_done() const;
  /// Continues `prompt` by `n` characters, sampling at `temperature` (collective in stage 3).
  std::string sample(const std::string& prompt, int n, float temperature, uint64_t seed);

  /// Collective: every parameter, unpadded, in param_specs order.
  std::vector<float> parameters();
  void save(const std::string& dir);
  void load(const std::string& dir);
  const strata::ZeroEngine& engine() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpt
