// One layout's predicted memory per device and step time on a cluster (docs/planner.md derives
// every term). Parameters, gradients and optimizer state come from the trainer's own
// memory_formula (exact for the reference GPT in fp32: validate checks the engine against it to
// the byte); activations, buffers and times from the models below.
#pragma once

#include "inputs.hpp"
#include "train/gpt_trainer.hpp"

namespace plan {

/// Bytes one device holds, by kind.
struct Memory {
  double params = 0, grads = 0, optimizer = 0, activations = 0, buffers = 0;
  double total() const { return params + grads + optimizer + activations + buffers; }
};
/// Weights, gradients and optimizer state of `params` parameters per device, ZeRO stage `zero`
/// over `dp` ranks: the figures the field's walkthroughs use (16 bytes a parameter either way).
Memory model_state(double params, Precision p, int zero, int dp);
/// Memory of the rank at pipeline stage `stage` of layout `o` on `ranks` devices.
Memory memory_of(const gpt::TrainOptions& o, int ranks, int stage, Precision p);

/// Bytes one rank's groups move in one step, each as strata-gpt reports it: the collectives'
/// in nccl-tests' bus sense (tp, dp, the dense average over ep), the pipeline's and the context
/// ring's sent. traffic_formula's, which validate holds the trainer to, at the precision's element
/// size.
struct Bytes {
  double tp = 0, pp = 0, dp = 0;
  double dp_gather = 0;  ///< of dp, the parameters' all-gathers
  double ep = 0, cp = 0;
};
/// Of the rank at pipeline stage `stage` of layout `o` on `ranks` devices.
Bytes traffic_of(const gpt::TrainOptions& o, int ranks, int stage, Precision p);

/// Seconds of one optimizer step: the computation, the pipeline's bubble, and each axis's
/// communication that the step waits for (exposed), with the axis's whole time beside it.
struct Time {
  double compute = 0, bubble = 0;
  struct Axis {
    double comm = 0, exposed = 0;
  } tp, pp, dp, ep, cp;
  double step() const {
    return compute + bubble + tp.exposed + pp.exposed + dp.exposed + ep.exposed + cp.exposed;
  }
};

/// FLOPs of one step of the whole model (forward, backward, and recompute's extra forward).
double step_flops(const gpt::TrainOptions& o, Precision p);

struct Estimate {
  Memory memory;  ///< of the stage that needs the most
  int stage = 0;  ///< which stage that is
  Bytes bytes;    ///< of stage 0, whose first rank strata-gpt's JSON reports
  Time time;
};
Estimate estimate(const gpt::TrainOptions& o, const ClusterSpec& c, Precision p);

}  // namespace plan
