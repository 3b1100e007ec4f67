// The reference GPT: a GPT-2 style decoder written as explicit forward and backward functions per
// unit over flat fp32 buffers. The trainer (trainer/train_*.cpp) owns the parameters (through a
// strata::ZeroEngine or plain buffers) and hands each unit's tensors in; this class owns only the
// activations of one micro-batch.
//
// Units, in forward order (they are the ZeroEngine's units, so stage 3 gathers one at a time):
//   unit 0          embeddings: wte [V, C], wpe [T, C]
//   unit 1 + l      block l:    ln1_w [C], ln1_b [C], attn_w [3C, C], attn_b [3C],
//                               proj_w [C, C], proj_b [C], ln2_w [C], ln2_b [C],
//                               fc_w [4C, C], fc_b [4C], fcproj_w [C, 4C], fcproj_b [C]
//   unit L + 1      final LayerNorm: lnf_w [C], lnf_b [C]
// The output head is tied to wte (logits = lnf(x) wte^T), so the head reads unit 0 again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "strata/sharding.hpp"

namespace gpt {

struct Config {
  int vocab = 65;   ///< V: characters of the corpus
  int ctx = 64;     ///< T: sequence length
  int layers = 2;   ///< L
  int heads = 2;    ///< C must divide by heads
  int embd = 32;    ///< C
  /// "tiny" (tests: trains in seconds) or "small" (the main job: a few million parameters).
  /// Throws std::invalid_argument naming the unknown configuration.
  static Config named(const std::string& name);
  size_t num_params() const;
};

/// The tensors in unit order, with the names and shapes above ("wte", "h0.attn_w", "lnf_w", ...).
std::vector<strata::TensorSpec> param_specs(const Config& c);
/// Deterministic GPT-2 initialisation of tensor t (index into param_specs) from `seed`: weights
/// N(0, 0.02), residual projections (proj_w, fcproj_w) N(0, 0.02 / sqrt(2L)), LayerNorm weights 1,
/// biases 0. Depends only on (config, seed, t), never on the world size or rank.
std::vector<float> init_tensor(const Config& c, uint64_t seed, size_t t);

/// Threads OpenBLAS may use in this process. Without a call, the first Model constructed sets
/// STRATA_GPT_BLAS_THREADS if that is set, else 1 (one thread per rank: ranks share the cores).
void set_blas_threads(int n);
/// Threads OpenBLAS uses now.
int blas_threads();

/// One span per tensor of a unit, in param_specs order.
using Params = std::vector<std::span<const float>>;
using Grads = std::vector<std::span<float>>;

/// Activations of one micro-batch of B sequences of T tokens, and the per-unit passes. A step:
///   embed(tokens, unit0); block(l, unit 1+l) for l = 0..L-1; loss = head(targets, unitL+1, wte)
///   head_backward(...); block_backward(l, ...) for l = L-1..0; embed_backward(...)
/// Gradients: `accumulate` false overwrites the gradient spans, true adds to them (gradient
/// accumulation over micro-batches). head_backward writes (or adds to) the wte gradient and
/// embed_backward always adds its part to it. `grad_scale` multiplies every gradient (the trainer
/// passes 1 / micro_batches).
class Model {
 public:
  /// `recompute`: keep only each block's input and recompute the block in backward
  /// (activation checkpointing).
  /// Every buffer is allocated here; the passes allocate nothing.
  Model(const Config& c, int batch, bool recompute = false);
  ~Model();
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;

  const Config& config() const { return c_; }
  int batch() const { return B_; }

  void embed(std::span<const int> tokens, const Params& unit0);
  void block(int l, const Params& p);
  /// Mean cross-entropy over the B*T positions (nats). With empty `targets` only the logits are
  /// computed (sampling) and the result is NaN; head_backward then throws.
  /// Spans of the wrong size and token ids outside [0, V) throw std::invalid_argument.
  float head(std::span<const int> targets, const Params& lnf, std::span<const float> wte);

  void head_backward(const Params& lnf, std::span<const float> wte, const Grads& lnf_grad,
                     std::span<float> wte_grad, float grad_scale, bool accumulate);
  void block_backward(int l, const Params& p, const Grads& g, bool accumulate);
  void embed_backward(const Grads& unit0_grad, bool accumulate);

  /// After head(): the logits of sequence b at position t (V values), for sampling. The model is
  /// causal: they depend only on tokens 0..t of sequence b, so a shorter prompt can be padded.
  std::span<const float> logits(int b, int t) const;

  /// Bytes of activation memory held (smaller with recompute).
  size_t activation_bytes() const;

 private:
  struct State;
  Config c_;
  int B_;
  bool recompute_;
  std::unique_ptr<State> s_;
};

}  // namespace gpt
