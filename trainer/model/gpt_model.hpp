// The reference GPT: a GPT-2 style decoder written as explicit forward and backward functions per
// unit over flat fp32 buffers. The trainer (trainer/gpt_trainer.cpp) owns the parameters (through
// a strata::ZeroEngine or plain buffers) and hands each unit's tensors in; this class owns only the
// activations of its micro-batches. Under tensor parallelism (ModelOptions::tp) a Model computes
// its rank's slice of every layer; under pipeline parallelism, a consecutive part of the blocks.
//
// Units, in forward order (they are the ZeroEngine's units, so stage 3 gathers one at a time):
//   unit 0          embeddings: wte [V, C], wpe [T, C]
//   unit 1 + l      block l:    ln1_w [C], ln1_b [C], attn_w [3C, C], attn_b [3C],
//                               proj_w [C, C], proj_b [C], ln2_w [C], ln2_b [C],
//                               fc_w [4C, C], fc_b [4C], fcproj_w [C, 4C], fcproj_b [C]
//                   (a mixture-of-experts block: its MLP's four tensors give way to router_w
//                   [E, C], exp_fc_w [E 4C, C], exp_fc_b [E 4C], exp_fcproj_w [E C, 4C],
//                   exp_fcproj_b [E C]: the E experts' MLPs stacked)
//   unit L + 1      final LayerNorm: lnf_w [C], lnf_b [C]
// The output head is tied to wte (logits = lnf(x) wte^T), so the head reads unit 0 again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/model_parallel.hpp"
#include "strata/sharding.hpp"

namespace gpt {

struct Config {
  int vocab = 65;  ///< V: characters of the corpus
  int ctx = 64;    ///< T: sequence length
  int layers = 2;  ///< L
  int heads = 2;   ///< C must divide by heads
  int embd = 32;   ///< C
  /// Mixture of experts (model/moe.hpp): E experts (0: none) replace the MLP of every
  /// `moe_every`-th block (block l when l % moe_every == 0, as Megatron's layer frequency), each
  /// token taking `top_k` of them; `capacity_factor` > 0 caps each expert's share of a
  /// sequence's assignments (0: dropless); the load-balancing loss weighs `aux_loss_coef`.
  int experts = 0;
  int top_k = 2;
  int moe_every = 1;
  double capacity_factor = 0;
  float aux_loss_coef = 0.01f;
  bool moe_block(int l) const { return experts > 0 && l % moe_every == 0; }
  /// "tiny" (tests: trains in seconds) or "small" (the main job: a few million parameters).
  /// Throws std::invalid_argument naming the unknown configuration.
  static Config named(const std::string& name);
  size_t num_params() const;
};

/// The tensors in unit order, with the names and shapes above ("wte", "h0.attn_w", "lnf_w", ...).
std::vector<strata::TensorSpec> param_specs(const Config& c);
/// Whether a tensor of param_specs holds experts (exp_fc_w, exp_fc_b, exp_fcproj_w, exp_fcproj_b):
/// under expert parallelism rank r of ep holds block r of its first dimension (E / ep experts).
bool is_expert_tensor(const std::string& name);
/// `specs` with every expert tensor's first dimension divided by `ep`.
std::vector<strata::TensorSpec> expert_local_specs(std::vector<strata::TensorSpec> specs, int ep);
/// Deterministic GPT-2 initialisation of tensor t (index into param_specs) from `seed`: weights
/// N(0, 0.02), residual projections (proj_w, fcproj_w) N(0, 0.02 / sqrt(2L)), LayerNorm weights 1,
/// biases 0. Depends only on (config, seed, t), never on the world size or rank.
std::vector<float> init_tensor(const Config& c, uint64_t seed, size_t t);

/// Threads OpenBLAS may use in this process. Without a call, the first Model constructed sets
/// STRATA_GPT_BLAS_THREADS if that is set, else 1 (one thread per rank: ranks share the cores).
void set_blas_threads(int n);
/// Sets OpenBLAS to a rank's threads as the first Model does (STRATA_GPT_BLAS_THREADS, else 1)
/// unless set_blas_threads was called: for what times the trainer's products outside a Model.
void default_blas_threads();
/// Threads OpenBLAS uses now.
int blas_threads();
/// The BLAS library's own description: version, build options and the kernels it chose.
std::string blas_config();

/// The kernels OpenBLAS runs (its core name: "SkylakeX", "Haswell", "Prescott").
std::string blas_kernel();
/// What a CPU can run, for choosing BLAS kernels.
struct CpuFeatures {
  bool avx = false, avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
};
/// The OpenBLAS kernels (an OPENBLAS_CORETYPE name) to use instead of `chosen`, the ones OpenBLAS
/// picked, where `chosen` is its fallback for a CPU it does not know (Prescott) and `cpu` runs
/// better ones; nullptr where OpenBLAS's choice stands.
const char* blas_kernel_for(const char* chosen, const CpuFeatures& cpu);
/// Call first in main(): where blas_kernel_for names better kernels than OpenBLAS loaded with,
/// and OPENBLAS_CORETYPE is unset, starts this program again (same pid, arguments and
/// environment) with OPENBLAS_CORETYPE set to them; else returns.
void use_best_blas_kernel(char** argv);

/// One span per tensor of a unit, in param_specs order.
using Params = std::vector<std::span<const float>>;
using Grads = std::vector<std::span<float>>;

/// What one Model computes, beyond the defaults (the whole model on one rank, one micro-batch).
namespace moe {
class Exchange;
}

struct ModelOptions {
  /// Keep only each block's input and recompute the block in backward (activation checkpointing).
  bool recompute = false;
  /// The blocks [first_layer, last_layer) (-1: to the last); a part holds the embeddings when it
  /// starts at block 0 and the final LayerNorm and head when it ends at the last block. A pipeline
  /// stage (or chunk of one) is such a part.
  int first_layer = 0, last_layer = -1;
  /// Tensor (and sequence) parallelism: what the layers are split over. Null: whole layers.
  /// Parameters are then the rank-local slices of its local_specs.
  ModelParallel* tp = nullptr;
  /// Expert parallelism: the ranks every mixture-of-experts block's experts are split over (E /
  /// size() each, in rank order) and its rows travel through (model/moe.hpp). Null: all experts
  /// here. Expert tensors are then this rank's blocks (expert_local_specs).
  moe::Exchange* ep = nullptr;
  /// Context parallelism: each rank holds ctx / size() positions of every sequence (two chunks,
  /// model_parallel.hpp) and attention sees the rest through it. Null: whole sequences. Tokens
  /// and targets are then this rank's positions of each sequence, [B, ctx / size()].
  ContextSplit* cp = nullptr;
  /// Micro-batches whose activations are held at once (a pipeline's in-flight micro-batches);
  /// select() picks the one the passes work on.
  int slots = 1;
};

/// Activations of B sequences of T tokens, and the per-unit passes. A step on the whole model:
///   embed(tokens, unit0); block(l, unit 1+l) for l = 0..L-1; loss = head(targets, unitL+1, wte)
///   head_backward(...); block_backward(l, ...) for l = L-1..0; embed_backward(...)
/// A part without the embeddings starts from input() (the previous stage's output()); a part
/// without the head starts backward from output_grad() (the next stage's input_grad()).
/// Gradients: `accumulate` false overwrites the gradient spans, true adds to them (gradient
/// accumulation over micro-batches). head_backward writes (or adds to) the wte gradient and
/// embed_backward always adds its part to it. `grad_scale` multiplies every gradient (the trainer
/// passes 1 / micro_batches).
class Model {
 public:
  /// Every buffer is allocated here; the passes allocate nothing (but tensor parallelism's
  /// staging). Throws std::invalid_argument for a bad part or a sequence that sequence
  /// parallelism cannot split.
  Model(const Config& c, int batch, const ModelOptions& o);
  explicit Model(const Config& c, int batch, bool recompute = false)
      : Model(c, batch, ModelOptions{.recompute = recompute}) {}
  ~Model();
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;

  const Config& config() const { return c_; }
  int batch() const { return B_; }
  int first_layer() const { return first_; }
  int last_layer() const { return last_; }
  bool has_embed() const { return first_ == 0; }
  bool has_head() const { return last_ == c_.layers; }

  /// The slot (micro-batch) the following passes use, 0..slots-1.
  void select(int slot);

  void embed(std::span<const int> tokens, const Params& unit0);
  void block(int l, const Params& p);
  /// Mean cross-entropy over the B*T positions (nats). With empty `targets` only the logits are
  /// computed (sampling) and the result is NaN; head_backward then throws.
  /// Spans of the wrong size and token ids outside [0, V) throw std::invalid_argument.
  float head(std::span<const int> targets, const Params& lnf, std::span<const float> wte);
  /// The load-balancing loss of this part's mixture-of-experts blocks in the selected slot's last
  /// forward (aux_loss_coef included; 0 without experts): the training loss is head() plus it.
  /// Under tensor parallelism each rank routes its share of the sequences and this is its share
  /// of the loss: the tp group's sum is the whole.
  float aux_loss() const;
  /// Mixture-of-experts block l's routing in the last block(l): the tokens each of the E experts
  /// took (assignments kept) and the assignments its capacity dropped. Read it right after
  /// block(l): under recompute the next block reuses the activations.
  struct ExpertStats {
    std::vector<int> tokens;
    long dropped = 0;
  };
  ExpertStats expert_stats(int l) const;

  void head_backward(const Params& lnf, std::span<const float> wte, const Grads& lnf_grad,
                     std::span<float> wte_grad, float grad_scale, bool accumulate);
  /// The scale the auxiliary loss's gradient takes in block_backward (head_backward sets it to
  /// its grad_scale): a part without the head sets it itself, once.
  void set_grad_scale(float grad_scale);
  void block_backward(int l, const Params& p, const Grads& g, bool accumulate);
  void embed_backward(const Grads& unit0_grad, bool accumulate);

  /// The selected slot's input of block first_layer() (a stage receives into it) and output of
  /// block last_layer() - 1 (a stage sends it): this rank's rows, [rows, C].
  std::span<float> input();
  std::span<const float> output() const;
  /// The gradient of output() (a stage receives into it before its first block_backward) and,
  /// after block_backward(first_layer()), the gradient of input() (a stage sends it).
  std::span<float> output_grad();
  std::span<const float> input_grad() const;

  /// After head(): the logits of sequence b at position t (V values), for sampling. The model is
  /// causal: they depend only on tokens 0..t of sequence b, so a shorter prompt can be padded.
  /// Whole-vocabulary models only (no tensor parallelism).
  std::span<const float> logits(int b, int t) const;

  /// Bytes of activation memory held (smaller with recompute, with sequence parallelism, with
  /// fewer slots).
  size_t activation_bytes() const;

 private:
  void check_layer(const char* where, int l) const;
  struct State;
  Config c_;
  int B_;
  bool recompute_;
  int first_, last_;
  ModelParallel* tp_;
  moe::Exchange* ep_;
  ContextSplit* cp_;
  std::unique_ptr<State> s_;
};

}  // namespace gpt
