// strata-plan --check and --calibrate: the predicted layouts run for real with strata-gpt, the
// prediction set beside the measurement term by term, and the compute rate and the links refitted
// from the runs into a file the next plan reads (docs/planner.md, "Checking a plan").
#pragma once

#include <string>
#include <vector>

#include "plan.hpp"

namespace plan {

/// What one strata-gpt run measured: the median step after the first, each axis's comm and
/// exposed seconds and rank 0's bytes (tp, pp, dp, ep, cp) of that step, and rank 0's memory;
/// over several rounds, the middle round's, with the range of the rounds' steps.
struct Measured {
  double step = 0, bubble = 0;
  int rounds = 1;
  double step_min = 0, step_max = 0;
  double comm[5] = {}, exposed[5] = {}, bytes[5] = {};
  double params = 0, grads = 0, optimizer = 0, activations = 0;
  std::string error;  ///< why the run gave nothing (its exit, a missing figure); empty when it did
};

/// How to run a layout: strata-gpt's path, the launcher ("{ranks}" becomes the world size; the
/// command follows it), steps per run, runs per layout (rounds, the layouts in turn in each), and
/// a folder for the runs' JSON and logs.
struct Runner {
  std::string gpt, launcher, workdir;
  int steps = 6, rounds = 1;
};

/// The layouts --check runs from `ranked` (plan()'s order), up to `n`: the top-ranked; the best
/// with data parallelism alone; the best with each axis the plan allows (tp, pp, cp, ep), alone
/// where it can be, so that a calibration sees every kind of exchange apart; the best of further
/// mesh shapes; and then the slowest that fits, as a control.
std::vector<Candidate> runs_to_check(const std::vector<Candidate>& ranked, size_t n);

/// Runs candidate `c` of `r` (a model strata-gpt trains: vocabulary 65, the bundled corpus), as
/// round `round` of how.rounds (its files are NAME.rK.json and .log when there are several).
Measured run_layout(const Request& r, const Candidate& c, const Runner& how, int round = 1);
/// A layout's rounds as one: the round whose step is the middle one (the faster of two), so that
/// its figures stay one run's, with the range of the steps; an error only if no round measured.
Measured middle_round(const std::vector<Measured>& rounds);

/// The figures a calibration replaces: the sustained compute rate with the small-matrix curve it
/// was fitted under (a plan measuring that curve again would move the fitted rate by its noise),
/// each link's speed, and the wait of a blocking exchange.
struct Calibration {
  double flops = 0, rows_half = 0;
  double intra_gbs = 0, intra_us = 0, inter_gbs = 0, inter_us = 0;
  double wait_us = 0, wait_share = 1, cp_extra = 0;
  double overlap_s_per_gb = 0;  ///< ClusterSpec's; 0 from a calibration on one node
};
/// The compute rate, the waits, context parallelism's extra computation (where a cp layout ran)
/// and, across nodes, the network's bandwidth and latency that bring the predicted step times
/// closest to the measured (least squares of the relative errors, descent.hpp).
Calibration fit(const Request& r, const std::vector<Candidate>& ran,
                const std::vector<Measured>& measured);
/// `cluster` with the calibration's figures.
void apply(const Calibration& k, ClusterSpec& cluster);
/// key = value lines; load throws std::invalid_argument naming the file and the line.
void save(const Calibration& k, const std::string& path);
Calibration load(const std::string& path);

/// Predicted against measured, term by term, with the error of each.
std::string check_table(const std::vector<Candidate>& ran, const std::vector<Measured>& measured);
/// How far the top-ranked run (ran's first) measured from the fastest run, in one line; empty
/// if the top-ranked measured nothing.
std::string ranking_verdict(const std::vector<Candidate>& ran,
                            const std::vector<Measured>& measured);

}  // namespace plan
