// strata-gpt's two modes. Each returns the process exit code (0: success).
#pragma once

#include "cli.hpp"
#include "strata/communicator.hpp"

namespace gpt {

/// Trains data-parallel over `world` (see docs/trainer.md).
int run_train(strata::Communicator& world, const CharCorpus& data, const RunOptions& r);
/// Trains the same steps under every layout the world size allows and compares each with the
/// one-rank reference; 1 if any differs beyond r.tolerance or parameters differ across ranks.
int run_validate(strata::Communicator& world, const CharCorpus& data, const RunOptions& r);

}  // namespace gpt
