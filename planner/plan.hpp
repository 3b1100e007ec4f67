// The plan: every layout a model can take on a cluster (tp in the node, pp, dp, ep, cp, ZeRO
// stage, sp, recompute, micro-batches, schedule), each checked as the trainer checks it, estimated
// (estimate.hpp), and ranked by predicted step time among those that fit the devices' memory.
#pragma once

#include <string>
#include <vector>

#include "estimate.hpp"

namespace plan {

struct Request {
  ModelSpec model;
  ClusterSpec cluster;
  Precision precision = Precision::fp32;
  int batch = 0;       ///< global batch, sequences per step
  std::string layout;  ///< evaluate this one only (validate's spelling), else every layout
};

struct Candidate {
  gpt::TrainOptions layout;
  std::string name;  ///< validate's spelling, with zero and recompute
  Estimate estimate;
  std::string refusal;  ///< why it cannot run or does not fit; empty when it does
};

/// Fitting candidates first, fastest first; then those that do not fit, smallest memory first.
/// With Request::layout, that one alone (refused with the trainer's own one-line reason when it
/// cannot run). Throws std::invalid_argument for a batch below 1.
std::vector<Candidate> plan(const Request& r);

/// validate's name of a layout, plus ".zeroN" and ".recompute" where they apply.
std::string full_name(const gpt::TrainOptions& o, int ranks);

}  // namespace plan
