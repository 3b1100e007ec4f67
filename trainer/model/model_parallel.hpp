// What the model asks of the parallelism its layers are split over: tensor (and sequence)
// parallelism implements it (parallel/tensor_parallel.hpp). The model calls it for its shapes
// and at the edges of its parallel regions, and knows nothing of the groups behind it; without
// one, a model holds whole layers, its rows are all local and its partial sums whole.
#pragma once

#include <cstddef>
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

}  // namespace gpt
