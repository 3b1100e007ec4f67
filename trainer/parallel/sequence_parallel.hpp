// Sequence parallelism (Megatron-LM, with tensor parallelism): the LayerNorm and residual regions
// hold only this rank's part of every sequence, positions [r*T/tp, (r+1)*T/tp), so their
// activations shrink by tp. Entering a column-parallel matmul all-gathers the rows along the
// sequence; leaving a row-parallel one reduce-scatters them: the same bytes as tensor
// parallelism's all-reduce, split in its two halves.
//
// Rows are [B][T] in the model and [tp][B][T/tp] in the collectives (rank r's rows contiguous):
// both functions permute through `staging` (B*T*C floats, resized here).
#pragma once

#include <vector>

#include "strata/communicator.hpp"

namespace gpt::sp {

/// All-gathers every rank's local rows [B*T/tp, C] into full [B*T, C] (sequence order).
void all_gather_rows(strata::Communicator& tp, const float* local, float* full,
                     std::vector<float>& staging, int B, int T, int C);
/// Sums partial [B*T, C] over the group and leaves this rank's rows in local [B*T/tp, C].
void reduce_scatter_rows(strata::Communicator& tp, const float* partial, float* local,
                         std::vector<float>& staging, int B, int T, int C);

}  // namespace gpt::sp
