// strata-gpt's command line: the mode, the training options and what to print or write.
#pragma once

#include <string>

#include "train/gpt_trainer.hpp"

namespace gpt {

struct RunOptions {
  std::string mode = "train";  ///< "train" or "validate"
  TrainOptions train;
  std::string data;  ///< corpus path (default: the bundled tiny shakespeare)
  int eval_every = 50, eval_batches = 4;
  int sample_chars = 200;      ///< text printed after training (0: none)
  std::string json, plot;      ///< metrics file and loss-curve SVG (empty: none)
  std::string save;            ///< checkpoint directory (empty: none)
  int save_every = 0;          ///< 0: only at the end when --save is given
  std::string resume;          ///< checkpoint directory to continue from
  double tolerance = 1e-5;     ///< validate: max |loss - reference| / reference
  std::string layouts;         ///< validate: the layouts to run (empty: every one), comma-separated
  std::string report;          ///< validate: directory for the certification report
  double bw_threshold = 0.05;  ///< validate: a group passes at busbw >= this x its link's promise
  std::string command_line;    ///< as typed, for the report
  bool quiet = false;          ///< no per-step lines
};

/// Parses argv (the mode first, optional). Throws std::invalid_argument naming the bad flag or
/// value; `help` is set when --help was asked.
RunOptions parse_command_line(int argc, char** argv, bool& help);
/// The --help text.
std::string usage();

}  // namespace gpt
