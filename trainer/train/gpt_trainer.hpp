// Training the reference GPT through Strata in any tp x ep x dp x pp layout: the ranks of a job
// form a strata::Mesh; each rank computes its tensor-parallel slice (tensor_parallel.hpp) of its
// pipeline stage's blocks (pipeline_parallel.hpp), with its share of every mixture-of-experts
// block's experts (expert_parallel.hpp), on its data slice of every global batch (the ep x dp
// ranks each read their own), with its parameters and optimizer state in a strata::ZeroEngine
// over the dp group (stage 0 = DDP with bucketed all-reduce, 1-3 = ZeRO).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/gpt_model.hpp"
#include "parallel/context_parallel.hpp"
#include "parallel/pipeline_schedule.hpp"
#include "strata/diloco.hpp"
#include "strata/mesh.hpp"
#include "strata/sharding.hpp"
#include "train/char_data.hpp"

namespace gpt {

struct TrainOptions {
  Config model;
  uint64_t seed = 1337;   ///< initialisation and data order
  int stage = 0;          ///< ZeRO stage: 0 (DDP) .. 3
  int global_batch = 32;  ///< sequences per step, over all ranks; divides by dp * micro
  int micro_batches = 1;  ///< per data-parallel rank and step: the pipeline's m, and
                          ///< gradient accumulation without a pipeline
  int tp = 1, pp = 1;     ///< tensor- and pipeline-parallel sizes; dp = ranks / (tp cp ep pp)
  int ep = 1;             ///< expert-parallel size: E / ep experts per rank (needs experts)
  int cp = 1;             ///< context-parallel size: ctx / cp positions of each sequence per rank
  CpComm cp_comm = CpComm::p2p;  ///< ring attention or Ulysses all-to-all
  bool sp = false;               ///< sequence parallelism (with tp)
  pp::Schedule schedule = pp::Schedule::one_f_one_b;
  int virtual_stages = 1;            ///< model chunks per pipeline rank (interleaved)
  bool allow_cross_node_tp = false;  ///< a tp group spanning nodes is an error unless set
  int steps = 200;
  float lr = 3e-3f, min_lr = 3e-4f, weight_decay = 0.1f, max_grad_norm = 1.0f;
  int warmup = 20;                 ///< linear warm-up steps, then cosine decay to min_lr at `steps`
  bool recompute = false;          ///< activation checkpointing
  int prefetch = 1;                ///< stage 3 prefetch depth
  size_t bucket_bytes = 1u << 20;  ///< gradient bucket cap (the model is small)
  strata::UpdateRule rule = strata::UpdateRule::adamw;  ///< the inner optimizer
  /// DiLoCo (strata/diloco.hpp): `islands` replicas of this layout, ranks / islands each, every
  /// island reading its share of the global batch; every `outer_every` steps their parameter
  /// deltas averaged and applied by outer SGD (lr, Nesterov momentum). outer_every 0: off.
  int islands = 1, outer_every = 0;
  float outer_lr = 0.7f, outer_momentum = 0.9f;
  int outer_fragments = 1;  ///< Streaming DiLoCo's fragments (1: the whole model at once)
  strata::OuterDtype outer_dtype = strata::OuterDtype::f32;  ///< the exchange's element type
  /// HOST:PORT of a running island job's store (its STRATA_STORE_PORT; the token from
  /// STRATA_JOIN_TOKEN): this job is one new island that joins it (strata::DiLoCo::join), laid
  /// out as its islands are. Empty: a job of `islands` islands of its own.
  std::string join;
  strata::OffloadOptions offload;  ///< AdamW moments in a file, through a window (ZeroEngine)
};

/// The job's communicator under mpirun, torchrun or strata-run; run without a launcher, a group
/// of one rank (so `strata-gpt train` works as a plain command).
strata::Communicator job_communicator();

/// The learning rate of step s (0-based): linear warm-up to lr, cosine decay to min_lr.
float learning_rate(const TrainOptions& o, int step);

/// Checks the layout before anything runs (`ranks`: the job's; each island's are ranks / islands):
/// the islands dividing the ranks, DiLoCo's options, tp * ep * pp dividing an island's ranks, ep
/// dividing the experts, tp dividing the heads (and the sequence under sp), no more pipeline stages
/// than layers, a schedule that accepts (p, m, v), a batch that divides into ep * dp *
/// micro-batches. Throws std::invalid_argument with one line.
void check_layout(const TrainOptions& o, int ranks);
/// The ranks of the whole training given this job's: the job's, or with --join those of all the
/// islands (this job is one of them).
int training_ranks(const TrainOptions& o, int job_ranks);
/// Ranks of `ranks` that read their own sequences: ep * dp in every island (cp ranks share
/// theirs, each its positions).
int data_ranks(const TrainOptions& o, int ranks);
/// "tp2.pp2.dp2", "ep2.dp2", "cp2.a2a.dp2" (with ".sp", the schedule and ".v2" where they apply;
/// an island's layout, then ".islands2.h50" with DiLoCo).
std::string layout_name(const TrainOptions& o, int ranks);

/// What one optimizer step measured (loss averaged over the global batch).
struct StepReport {
  int step = 0;
  float loss = 0, lr = 0;
  double seconds = 0, comm_seconds = 0, exposed_seconds = 0;
  double bus_bytes = 0;  ///< bytes the step's collectives moved per rank, nccl-tests "bus" sense
  double grad_norm = 0;  ///< the whole model's gradient norm before clipping (0: clipping off)
  /// Pipeline instruments: this rank's forward and backward passes' wall time and the part of it
  /// spent computing (not blocked on another stage).
  double pass_seconds = 0, compute_seconds = 0;
  double tp_bus_bytes = 0;  ///< the tp group's collectives, bus sense
  double pp_bytes = 0;      ///< activations and gradients this rank sent to other stages
  /// Expert parallelism: the rows and counts this rank sent to other ranks of ep (dispatch and
  /// combine, forward and backward), the seconds it spent in those exchanges (all exposed: the
  /// layer waits for its rows), and the dense gradients' average over ep, bus sense.
  double ep_bytes = 0, ep_seconds = 0, ep_bus_bytes = 0;
  /// Context parallelism: the keys and values (and their gradients) or the all-to-alls' rows this
  /// rank sent to other cp ranks, and the seconds attention waited for them (exposed).
  double cp_bytes = 0, cp_seconds = 0;
  /// Each parallel axis's communication in the step: the seconds it took (comm) and the part
  /// this rank waited for it (exposed), the axis's size 1: zero. Blocking operations (tp's, the
  /// experts' exchanges, the all-to-all attention) count whole in both; the dp engine's buckets
  /// run behind backward (its own StepStats); where a transfer runs behind computation and its
  /// own time is not known (pp's sends, the ring's blocks, ep's dense average), comm is the
  /// waited time too.
  struct Axis {
    double comm = 0, exposed = 0;
  };
  struct Axes {
    Axis tp, pp, dp, ep, cp;
  } axes;
  /// The same figures of every pipeline stage (its first rank's), stage by stage. Every step
  /// starts together on all ranks (the previous one ended in a world-wide reduction of the loss),
  /// so the pipeline's time is the longest stage's passes, and a stage's bubble is the share of it
  /// that stage did not compute: 1 - compute / max over stages of pass.
  struct Stage {
    double pass_seconds = 0, compute_seconds = 0, tp_bus_bytes = 0, pp_bytes = 0;
    double bubble = 0;
  };
  std::vector<Stage> stages;
  /// Each mixture-of-experts block's routing over the step, all ranks' tokens: the tokens its
  /// least, average and most loaded expert took, and the assignments its capacity dropped. Under
  /// expert parallelism, the bytes its exchanges sent between ranks (all ranks' sum), the same
  /// from the routing by formula (docs/trainer.md), and the seconds a rank spent in them (the
  /// ranks' mean).
  struct Experts {
    int layer = 0;
    double min = 0, mean = 0, max = 0;
    double dropped = 0;
    double a2a_bytes = 0, a2a_bytes_formula = 0, a2a_seconds = 0;
  };
  std::vector<Experts> experts;
  /// DiLoCo: whether the step ended in an outer step, the bytes it moved between islands (this
  /// rank's all-reduce, bus sense) and its seconds.
  bool outer = false;
  double outer_bytes = 0, outer_seconds = 0;
};

class Trainer {
 public:
  /// Collective over `world` (the ranks of this layout): builds the mesh and every group.
  /// Throws std::invalid_argument for a layout check_layout refuses.
  Trainer(strata::Communicator world, const CharCorpus& data, TrainOptions o);
  ~Trainer();

  /// Runs the next optimizer step (steps_done() is its index).
  StepReport step();
  /// Mean validation loss over `batches` global batches (collective; with islands, each reads
  /// its share of every batch and the islands' losses are averaged).
  float evaluate(int batches);
  int steps_done() const;
  /// Whether this rank reports for the job: the first rank of the first island training (job rank
  /// 0 until its island is lost; then the first rank of the next island left; a joining island's
  /// first rank in its own job).
  bool leads() const;
  /// Continues `prompt` by `n` characters, sampling at `temperature` (collective in stage 3).
  std::string sample(const std::string& prompt, int n, float temperature, uint64_t seed);

  /// Collective: every parameter of the whole model, unpadded, in param_specs order.
  std::vector<float> parameters();
  /// Collective: whether every replica is bit-identical to the others: the local parameters
  /// across the dp group, the replicated tensors across the tp group, the tied embedding's two
  /// copies across the first and last pipeline stages.
  bool replicas_identical();
  /// Collective: writes the whole model's parameters, moments and step to DIR
  /// (model_checkpoint.hpp), whatever this layout.
  void save(const std::string& dir);
  /// Collective: continues from a checkpoint any layout wrote. Throws std::invalid_argument for
  /// another model, std::runtime_error for an unreadable file.
  void load(const std::string& dir);
  /// This rank's engine (its slice of the model, over the dp group).
  const strata::ZeroEngine& engine() const;
  /// The layout's groups.
  strata::Mesh& mesh();
  /// Activation memory this rank holds (every slot of every chunk), bytes.
  size_t activation_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpt
