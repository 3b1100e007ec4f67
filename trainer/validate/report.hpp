// The certification report of `strata-gpt validate`: a directory holding README.md (GitHub
// Markdown) and the SVG pictures it shows. A cluster operator keeps it as the record that this
// cluster trained the same steps under every layout as one rank alone, so it must read without
// Strata: plain data in, plain files out, nothing here depends on the library.
//
// The writer judges nothing: every verdict (a layout's pass, a probe's pass, the run's pass) is
// the caller's; the report shows them and explains each failure from the fields that caused it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpt {

/// A machine and the world ranks it hosts.
struct ReportNode {
  std::string name;
  std::vector<int> ranks;
  std::string cpu_model;   ///< empty when the topology does not say
  int cores = 0, pus = 0;  ///< physical cores and hardware threads; 0 when unknown
};

/// One distinct link class among the world's rank pairs, as the topology layer rates it.
struct ReportLink {
  std::string cls;           ///< "SHM" (two processes of one host), "NVL", "PHB", "NET", ...
  double bandwidth_gbs = 0;  ///< GB/s, the topology's estimate
  double measured_gbs = -1;  ///< GB/s, a send/recv between the example pair; < 0: not measured
  double latency_us = 0;
  int example_a = 0, example_b = 0;  ///< one pair of world ranks joined by this class
  int pairs = 0;                     ///< how many rank pairs are
};

/// Every group of one mesh dimension, each as its world ranks in group order (for "pp", the
/// rank of stage s is groups[g][s]).
struct ReportGroup {
  std::string dim;  ///< "tp", "pp", "dp"
  std::vector<std::vector<int>> groups;
};

/// One bandwidth probe: a collective on one group of the layout.
struct ReportBandwidth {
  std::string dim, collective;  ///< "tp", "all_reduce"; "pp", "send/recv"
  std::vector<int> ranks;       ///< the probed group's world ranks
  double bytes = 0;             ///< message size
  double busbw_gbs = 0;         ///< measured bus bandwidth (nccl-tests sense)
  std::string link_class;       ///< the group's weakest link
  double promise_gbs = 0;       ///< the topology's estimate for that link
  double threshold = 0;         ///< passes when busbw >= threshold * promise
  /// False where a figure cannot speak for the link (ranks sharing cores): shown, not judged,
  /// and then pass is true.
  bool judged = true;
  std::string why_not_judged;
  bool pass = false;
};

/// One pipeline stage of a layout (a single row when pp = 1); traffic is per step.
struct ReportStage {
  int stage = 0;
  double bubble = 0, ideal_bubble = 0;  ///< measured 1 - compute/pass time; the schedule's ideal
  double tp_bytes = 0, tp_bytes_formula = 0;  ///< tp group collectives, bus sense
  double pp_bytes = 0, pp_bytes_formula = 0;  ///< activations and gradients sent to other stages
  double dp_bus_bytes = 0, dp_bus_bytes_formula = 0;  ///< dp group collectives, bus sense
  double ep_bus_bytes = 0, ep_bus_bytes_formula = 0;  ///< the dense gradients' average over ep
  double ep_bytes = 0;  ///< the experts' rows and counts sent to other ep ranks (routing decides)
  double cp_bytes = 0, cp_bytes_formula = 0;                    ///< attention's traffic over cp
  size_t param_bytes = 0, grad_bytes = 0, optimizer_bytes = 0;  ///< measured (engine)
  size_t param_bytes_formula = 0, grad_bytes_formula = 0, optimizer_bytes_formula = 0;
  size_t activation_bytes = 0;  ///< peak activation memory of the rank
};

struct ReportLayout {
  std::string name;  ///< "tp2.sp.pp2.1f1b.dp2.zero1"
  int tp = 1, pp = 1, dp = 1, ep = 1, cp = 1, zero_stage = 0, virtual_stages = 1, micro_batches = 1;
  std::string cp_comm;  ///< "p2p" or "a2a"; empty when cp = 1
  bool sp = false;
  std::string schedule;             ///< "gpipe", "1f1b", "interleaved"; empty when pp = 1
  std::vector<ReportGroup> groups;  ///< the mesh, per dimension
  std::vector<float> losses;        ///< per step
  double max_rel_diff = 0;          ///< against the reference, over every step
  double grad_norm_rel_diff = 0;    ///< of the gradient norm before clipping, the same way
  bool bit_identical = false;       ///< losses bit-identical to the reference's
  bool replicas_identical = false;  ///< dp copies, tp-replicated tensors, tied embeddings
  bool formulas_match = false;      ///< traffic and memory equal their formulas on every rank
  double step_ms = 0;
  std::vector<ReportStage> stages;
  std::vector<ReportBandwidth> bandwidth;
  bool pass = false;  ///< numerics && replicas && formulas && every bandwidth probe
};

struct Report {
  std::string title;  ///< "strata-gpt validate: tiny, 8 ranks"
  std::string strata_version, commit, compiler, date_utc, command_line;
  std::string kernel;  ///< of the node writing the report ("Linux 6.1.0-28-amd64")
  /// Libraries the run used ("UCX", "1.13.1"), and the environment variables that change Strata's,
  /// UCX's, BLAS's or OpenMP's behaviour (secrets shown as set, not by value).
  std::vector<std::pair<std::string, std::string>> libraries, environment;
  double wall_seconds = 0;  ///< the whole validation, reference included
  uint64_t seed = 0;
  std::string model;  ///< "L 4, H 4, C 32, T 16, V 65, 53472 parameters"
  int ranks = 0, steps = 0, global_batch = 0;
  double tolerance = 0;            ///< of the losses, relative, every step
  double grad_norm_tolerance = 0;  ///< of the gradient norms (rounding.hpp: reorder_bound)
  std::vector<ReportNode> nodes;
  std::vector<ReportLink> links;
  std::vector<float> reference_losses;
  double reference_step_ms = 0;
  std::vector<ReportLayout> layouts;
  bool pass = false;  ///< the report says PASS only when this and every layout's pass hold
};

/// Writes the report into `dir` (created, parents too): one mesh-NN-<layout>.svg per layout,
/// inventory.svg, losses.svg, bubble.svg, and README.md last, so a README means a whole report.
/// Each file goes through a temporary and a rename. Files of an earlier report in `dir` that
/// this one does not write are left alone. The same Report gives byte-identical files.
/// Returns the paths written, in order. Throws std::runtime_error naming the path on failure.
std::vector<std::string> write_report(const std::string& dir, const Report& r);

}  // namespace gpt
