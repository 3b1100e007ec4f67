// What strata-plan plans for: a model (a preset or explicit sizes of the reference GPT's
// architecture) and a cluster (N nodes of G devices of a known kind, or this machine), with the
// figures the estimates read: device memory, a sustained compute rate, and the links within and
// between nodes (docs/planner.md says where each default comes from).
#pragma once

#include <string>

#include "model/gpt_model.hpp"
#include "strata/topology.hpp"

namespace plan {

enum class Precision { fp32, bf16_mixed };
/// "fp32" or "bf16-mixed"; throws std::invalid_argument for another name.
Precision precision_from_name(const std::string& name);
const char* precision_name(Precision p);

/// A model of the reference GPT's architecture (GPT-2: learned positions, LayerNorm, GELU MLP
/// of 4C, tied embedding; optional mixture-of-experts MLPs).
struct ModelSpec {
  std::string name;  ///< the preset's, or "custom"
  gpt::Config config;
};
/// small (the trainer's), gpt2 (124M), 7b (GPT-3 6.7B), 70b (80 layers of 8192), 175b (GPT-3),
/// moe (Mixtral-like: 8 experts, top-2, with GPT MLPs). Throws std::invalid_argument naming the
/// known ones.
ModelSpec model_preset(const std::string& name);

struct ClusterSpec {
  std::string description;  ///< "128 x 8 h100", "this machine (live)"
  std::string device;       ///< h100, a100, cpu
  int nodes = 1, per_node = 1;
  /// Cores of a node its devices share, when fewer than `per_node` (ranks of a cpu cluster
  /// beyond its cores); 0: every device its own.
  int cores = 0;
  double memory_bytes = 0;   ///< per device
  double flops = 0;          ///< sustained FLOP/s per device at the plan's precision
  std::string flops_source;  ///< how `flops` was obtained, for the report
  /// A micro-batch's rows (its positions on one rank) at which the computation runs at half
  /// `flops`: small matrices run slower. Measured on cpu; 0 (no effect) on GPUs, unmeasured.
  double rows_half = 0;
  /// What each blocking exchange waits for its slowest peer beyond the link: 0 on dedicated
  /// devices; a calibration fits it (on shared cores, mostly the scheduler's delay).
  double wait_us = 0;
  /// The most of its computation a step's waits add up to (a peer is late by its own work
  /// between two exchanges at most); a calibration fits it.
  double wait_share = 1;
  /// The computation a split sequence adds, as a share of the step's (context parallelism's
  /// work outside the FLOP count: small per-chunk products, the online softmax's rescaling): 0
  /// until a calibration fits it.
  double cp_extra = 0;
  /// Core-seconds per GB a rank moves across the network behind its computation (data
  /// parallelism's gradients and parameters): on cores its node's ranks share, the copies and
  /// progress threads of a hidden transfer take them from the computation. 0 until a
  /// calibration across nodes fits it.
  double overlap_s_per_gb = 0;
  strata::Link intra, inter;
  bool host = true;  ///< collectives on host memory (shared segment), not NCCL
  int devices() const { return nodes * per_node; }
};

/// "NxG" of a device kind (h100, a100: NVLink in the node, 400 or 200 Gb/s InfiniBand per GPU;
/// cpu: one rank per core of this machine's kind), at `p`'s compute rate. Throws
/// std::invalid_argument naming what does not parse.
ClusterSpec cluster_of(const std::string& nxg, const std::string& device, Precision p);
/// Call first in main(): runs this process on the BLAS kernels the trainer chooses
/// (gpt::use_best_blas_kernel), so that a live cluster's measured rate is the trainer's.
void use_trainer_blas_kernels(char** argv);
/// This machine: its cores as devices, its memory shared among them, its links from the
/// topology layer, its compute rate measured with the trainer's own matrix product.
ClusterSpec live_cluster(int nodes = 1);
/// A topology file (hwloc XML, NCCL XML, Strata dump) times `nodes`: its GPUs as devices (or
/// its cores when it has none), the links between them and to its NIC; memory and compute of
/// the GPU kind the file names (h100, a100), else of `device`.
ClusterSpec cluster_from_file(const std::string& path, int nodes, const std::string& device,
                              Precision p);
/// The cluster a `strata-perf --json` run measured (its ranks over its nodes, cores of this
/// machine's kind), with the link it crossed (the network's across nodes, else the node's)
/// fitted to its times through the library's cost model. Throws std::invalid_argument naming
/// the file and what it lacks.
ClusterSpec cluster_from_perf(const std::string& path, Precision p);

}  // namespace plan
