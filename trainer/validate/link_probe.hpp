// Bandwidth probes of a layout's groups: each group runs the collectives the layout runs on it
// (tp: all-reduce, and all-gather and reduce-scatter under sp; dp: what its ZeRO stage uses; pp:
// send/recv to the next stage) and its bus bandwidth is set against what the topology promises
// for the group's weakest link. Every group of a dimension probes at once, as in training.
#pragma once

#include <vector>

#include "strata/mesh.hpp"
#include "train/gpt_trainer.hpp"
#include "validate/report.hpp"

namespace gpt {

/// The class of the link between world ranks a and b as the report names it: "SHM" for two CPU
/// processes of one host (they talk through its memory, whatever the topology's path class says),
/// the topology's class name ("NVL", "PHB", "NET", ...) otherwise.
std::string link_label(const strata::JobTopology& job, int a, int b);

/// Collective over the mesh's world. Returns every group's probes on rank 0 of the world (each
/// group's bandwidth that of its slowest member); other ranks get an empty vector. A probe passes
/// when busbw >= threshold * promise.
std::vector<ReportBandwidth> probe_groups(strata::Mesh& mesh, const TrainOptions& o,
                                          double threshold, size_t bytes = 4u << 20);

}  // namespace gpt
