// What the model asks of the parallelism its layers are split over: tensor (and sequence)
// parallelism implements it (parallel/tensor_parallel.hpp). The model calls it for its shapes
// and at the edges of its parallel regions, and knows nothing of the groups behind it; without
// one, a model holds whole layers, its rows are all local and its partial sums whole.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "strata/sharding.hpp"

namespace gpt {

struct Config;

class ModelParallel {
 public:
  virtual ~ModelParallel() = default;
  /// Ranks the heads, the MLP's hidden units and the vocabulary are split over; this rank.
  virtual int size() const = 0;
  virtual int rank() const = 0;
  /// Whether the LayerNorm and residual regions hold only this rank's part of the sequence.
  virtual bool sequence_parallel() const = 0;
  /// Every tensor of param_specs(c) with this rank's shape.
  virtual std::vector<strata::TensorSpec> local_specs(const Config& c) const = 0;
  /// How many vocabulary ids this rank holds: the vocabulary padded to a multiple of size(),
  /// divided by it; this rank's first id is rank() times that.
  virtual int vocab_share(int vocab) const = 0;
  /// Rows of B sequences of T positions this rank holds in the LayerNorm and residual regions,
  /// and the position in its sequence of local row i.
  virtual size_t local_rows(int B, int T) const = 0;
  virtual int position(size_t i, int T) const = 0;
  /// Entering a column-parallel product (f forward, g backward): this rank's rows -> all rows.
  virtual const float* gather_rows(const float* local, float* full, int B, int T, int C) = 0;
  /// Leaving a row-parallel product (g forward, f backward): partial sums -> this rank's rows.
  virtual float* reduce_rows(float* partial, float* local, int B, int T, int C) = 0;
  /// In place: `count` floats of every rank, in rank order; this rank's at all + rank() * count
  /// on entry, every rank's on return (a mixture-of-experts block's shares of the sequences).
  virtual void all_gather_sequences(float* all, size_t count) = 0;
  /// The vocabulary-parallel cross-entropy (tensor_parallel.hpp says how).
  virtual double cross_entropy(float* probs, const float* logits, const int* targets, int N, int Vl,
                               int first, int V) = 0;
};

/// Position in its sequence of local position p (of Tl) on rank `owner` of P context-parallel
/// ranks: chunk owner, then chunk 2 P - 1 - owner, of Tl / 2 positions each.
inline int chunk_position(int owner, int P, int p, int Tl) {
  const int c = Tl / 2;
  return (p < c ? owner : 2 * P - 1 - owner) * c + p % c;
}

/// What the model asks of context parallelism (parallel/context_parallel.hpp implements it, as a
/// ring or an all-to-all). Each of size() ranks holds T / size() positions of every sequence: two
/// chunks of T / (2 size()), chunk rank() and chunk 2 size() - 1 - rank(), so that causal
/// attention's work is the same on every rank. Everything but attention works on these rows
/// alone; attention sees the other ranks' keys and values through this.
class ContextSplit {
 public:
  virtual ~ContextSplit() = default;
  virtual int size() const = 0;
  virtual int rank() const = 0;
  /// Position in its sequence of this rank's local position p (Tl = T / size() of them).
  int position(int p, int Tl) const { return chunk_position(rank(), size(), p, Tl); }
  /// Floats one block keeps from attention's forward to its backward (B sequences of Tl local
  /// positions, C channels in NH heads).
  virtual size_t state_floats(int B, int Tl, int C, int NH) const = 0;
  /// Causal attention of the local rows' queries over every rank's keys and values, as
  /// layers::attention_forward on the whole sequence: qkv [B, Tl, 3C], out [B, Tl, C].
  virtual void attention_forward(float* out, float* state, const float* qkv, int B, int Tl, int C,
                                 int NH) = 0;
  /// dqkv [B, Tl, 3C] written from dout [B, Tl, C], with the forward's qkv, out and state.
  virtual void attention_backward(float* dqkv, const float* dout, const float* qkv,
                                  const float* out, const float* state, int B, int Tl, int C,
                                  int NH) = 0;
  /// What a mixture of experts needs to route whole sequences (moe::route): `v` summed over the
  /// ranks, in place; and every rank's `mine`, in rank order, into `all` (size() times as long).
  virtual void sum(std::span<double> v) = 0;
  virtual void all_gather(std::span<const float> mine, std::span<float> all) = 0;
};

}  // namespace gpt
