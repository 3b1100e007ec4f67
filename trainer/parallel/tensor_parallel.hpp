// Tensor parallelism (Megatron-LM): which slice of each tensor a rank of the tp group holds, and
// the collectives the model calls at the edges of its parallel regions. Attention heads and the
// MLP's hidden units are split over the group (column-parallel attn_w and fc_w, row-parallel
// proj_w and fcproj_w), the vocabulary too (wte's rows, padded to a multiple of tp, with a
// parallel cross-entropy); LayerNorms, row-parallel biases and wpe are replicated.
//
// The conjugate operators: entering a column-parallel matmul is f (identity forward, all-reduce
// backward), leaving a row-parallel one is g (all-reduce forward, identity backward). With
// sequence parallelism (trainer/sequence_parallel.hpp) f becomes an all-gather along the sequence
// and g a reduce-scatter, and the regions between them hold only this rank's part of the
// sequence. Model code calls two primitives for both: gather_rows (f forward, g backward) and
// reduce_rows (g forward, f backward).
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <vector>

#include "model/gpt_model.hpp"
#include "strata/communicator.hpp"

namespace gpt {

/// How a tensor is split over the tp group.
enum class TpSplit {
  replicated,  ///< every rank holds all of it (LayerNorms, row-parallel biases, wpe)
  rows,        ///< rows split in tp blocks (fc_w, fc_b: column-parallel)
  qkv_rows,    ///< each of q, k and v split in tp blocks (attn_w, attn_b)
  columns,     ///< columns split (proj_w, fcproj_w: row-parallel)
  vocab,       ///< rows padded to a multiple of tp, then split (wte)
};
TpSplit tp_split(const std::string& tensor_name);
/// A LayerNorm weight or bias: under sequence parallelism each rank's gradient covers only its
/// rows, so the trainer sums it over the group.
bool is_layernorm(const std::string& tensor_name);

/// The vocabulary padded to a multiple of tp; rank r holds ids [r * Vp/tp, (r + 1) * Vp/tp).
int padded_vocab(int vocab, int tp);

/// param_specs(c) as rank-local shapes for a tp group of `tp` ranks (tp = 1: param_specs(c)).
/// Throws std::invalid_argument naming heads and tp when tp does not divide the heads.
std::vector<strata::TensorSpec> tp_param_specs(const Config& c, int tp);
/// Rank `r`'s slice of tensor t (an index into param_specs) given its full value; padded
/// vocabulary rows are zero.
std::vector<float> tp_slice(const Config& c, size_t t, std::span<const float> full, int tp, int r);
/// Writes rank r's slice of tensor t where it belongs in `full` (the tensor's whole extent).
void tp_place(const Config& c, size_t t, std::span<const float> slice, int tp, int r,
              std::span<float> full);
/// The inverse of tp_slice: the full tensor t from every rank's slice (slices[r] is rank r's).
std::vector<float> tp_unslice(const Config& c, size_t t,
                              const std::vector<std::vector<float>>& slices);

/// The tp group a Model computes in (model_parallel.hpp). Copies share the communicator; not
/// thread-safe.
class TensorParallel : public ModelParallel {
 public:
  /// `sequence_parallel`: shard the LayerNorm and residual regions along the sequence.
  TensorParallel(strata::Communicator group, bool sequence_parallel);

  int size() const override { return group_.size(); }
  int rank() const override { return group_.rank(); }
  bool sequence_parallel() const override { return sp_; }
  strata::Communicator& group() { return group_; }
  /// tp_param_specs(c, size()).
  std::vector<strata::TensorSpec> local_specs(const Config& c) const override;
  /// padded_vocab(vocab, size()) / size().
  int vocab_share(int vocab) const override;

  /// Rows of B sequences of T positions this rank holds in the LayerNorm/residual regions:
  /// B*T, or B*T/tp under sequence parallelism (positions [rank*T/tp, (rank+1)*T/tp) of each
  /// sequence, sequence by sequence).
  size_t local_rows(int B, int T) const override;
  /// Position in its sequence of local row i.
  int position(size_t i, int T) const override;

  /// f forward / g backward: this rank's rows [local_rows, C] -> all B*T rows. Returns `local`
  /// itself without sequence parallelism; else all-gathers into `full` and returns it.
  const float* gather_rows(const float* local, float* full, int B, int T, int C) override;
  /// g forward / f backward: partial sums over all B*T rows -> the reduced rows of this rank.
  /// All-reduces `partial` in place and returns it; under sequence parallelism reduce-scatters
  /// into `local` and returns that (`partial` is clobbered).
  float* reduce_rows(float* partial, float* local, int B, int T, int C) override;
  void all_gather_sequences(float* all, size_t count) override;

  /// The vocabulary-parallel cross-entropy over logits [N, Vl] of vocabulary ids [first,
  /// first + Vl), of which ids >= V are padding: max, then (sum of exponentials, target logit)
  /// reduced over the group. Writes the softmax probabilities of this rank's columns (0 for
  /// padding) and returns the sum over rows of -log p[target] (0 when targets is null).
  double cross_entropy(float* probs, const float* logits, const int* targets, int N, int Vl,
                       int first, int V) override;

  /// Sums v over the group in place (LayerNorm gradients under sequence parallelism).
  void all_reduce_sum(std::span<float> v);

  /// Bytes this rank's collectives moved since the last call, nccl-tests' bus sense, and the
  /// seconds they took (every one blocks: all of it exposed).
  double take_bus_bytes();
  double take_seconds();

 private:
  strata::Communicator group_;
  bool sp_;
  std::vector<float> staging_;  // sequence parallelism: the chunk-major copy of all rows
  std::vector<float> row_max_;
  std::vector<double> row_sums_;
  double bus_bytes_ = 0, seconds_ = 0;
  template <typename F>
  void timed(F f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
};

}  // namespace gpt
