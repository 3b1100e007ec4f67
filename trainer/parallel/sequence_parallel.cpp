#include "parallel/sequence_parallel.hpp"

#include <algorithm>

namespace gpt::sp {

namespace {
// Copies between sequence order [B][T][C] and chunk order [tp][B][T/tp][C], one run of T/tp
// positions at a time.
template <bool ToChunks>
void permute(float* chunked, float* ordered, int tp, int B, int T, int C) {
  const size_t run = size_t(T / tp) * C;
  for (int r = 0; r < tp; ++r)
    for (int b = 0; b < B; ++b) {
      float* c = chunked + (size_t(r) * B + b) * run;
      float* o = ordered + size_t(b) * T * C + size_t(r) * run;
      if (ToChunks)
        std::copy_n(o, run, c);
      else
        std::copy_n(c, run, o);
    }
}
}  // namespace

void all_gather_rows(strata::Communicator& tp, const float* local, float* full,
                     std::vector<float>& staging, int B, int T, int C) {
  const size_t n = size_t(B) * T * C;
  staging.resize(n);
  tp.all_gather(strata::Buffer{const_cast<float*>(local), n / size_t(tp.size())},
                strata::Buffer{staging.data(), n})
      .wait();
  permute<false>(staging.data(), full, tp.size(), B, T, C);
}

void reduce_scatter_rows(strata::Communicator& tp, const float* partial, float* local,
                         std::vector<float>& staging, int B, int T, int C) {
  const size_t n = size_t(B) * T * C;
  staging.resize(n);
  permute<true>(staging.data(), const_cast<float*>(partial), tp.size(), B, T, C);
  tp.reduce_scatter(strata::Buffer{staging.data(), n}, strata::Buffer{local, n / size_t(tp.size())},
                    strata::ReduceOp::sum)
      .wait();
}

}  // namespace gpt::sp
