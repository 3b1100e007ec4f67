// Ulysses attention (context_parallel.hpp, DeepSpeed-Ulysses): rank j of cp takes heads
// [j NH / cp, (j + 1) NH / cp) of every position. An all-to-all sends each rank the q, k and v
// columns of its heads for this rank's rows; the arrivals are placed at their positions in the
// sequence; layers::attention_forward runs on whole sequences of those heads; a second
// all-to-all returns each rank its rows of every head's output. The backward sends the output's
// gradient the same way, runs layers::attention_backward, and returns q, k and v's gradients.
// Kept per block: the gathered q, k, v of its heads and their probabilities.
#include <algorithm>
#include <chrono>
#include <vector>

#include "model/gpt_layers.hpp"
#include "parallel/context_parallel.hpp"

namespace gpt {

namespace {

using Clock = std::chrono::steady_clock;

class UlyssesAttention final : public ContextParallel {
 public:
  using ContextParallel::ContextParallel;
  size_t state_floats(int B, int Tl, int C, int NH) const override {
    const size_t P = size_t(size()), T = size_t(Tl) * P;
    return size_t(B) * T * 3 * (size_t(C) / P) + size_t(B) * (size_t(NH) / P) * T * T;
  }
  void attention_forward(float* out, float* state, const float* qkv, int B, int Tl, int C,
                         int NH) override;
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                          const float* state, int B, int Tl, int C, int NH) override;

 private:
  // Moves `parts` column runs of `w` floats per row: run i of this rank's local row (b, p) at
  // local[(b Tl + p) ld + offset(i) + j w] goes to rank j, whose copy lands at whole-sequence row
  // (b, position of p) of `whole`, run i at i w (width parts w). `back` is the reverse.
  void exchange(float* local, int ld, int parts, const int* offsets, float* whole, int B, int Tl,
                int w, bool back);

  std::vector<float> send_, recv_, y_, dy_, dqkv_, scratch_;
};

void UlyssesAttention::exchange(float* local, int ld, int parts, const int* offsets, float* whole,
                                int B, int Tl, int w, bool back) {
  const int P = size();
  const size_t T = size_t(Tl) * P, run = size_t(w), width = size_t(parts) * run;
  const size_t block = size_t(B) * Tl * width;  // what one rank sends another
  send_.resize(block * P);
  recv_.resize(block * P);
  // Rank j's block: this rank's rows, its runs (forward), or the rows of j's positions (back).
  for (int j = 0; j < P; ++j)
    for (int b = 0; b < B; ++b)
      for (int p = 0; p < Tl; ++p) {
        float* dst = send_.data() + size_t(j) * block + (size_t(b) * Tl + p) * width;
        if (!back) {
          const float* row = local + (size_t(b) * Tl + p) * size_t(ld);
          for (int i = 0; i < parts; ++i)
            std::copy_n(row + offsets[i] + j * run, run, dst + i * run);
        } else {
          const size_t pos = size_t(chunk_position(j, P, p, Tl));
          std::copy_n(whole + (size_t(b) * T + pos) * width, width, dst);
        }
      }
  const auto t0 = Clock::now();
  cp_.all_to_all(strata::buffer(send_), strata::buffer(recv_)).wait();
  seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
  bytes_ += 4.0 * double(block) * (P - 1);
  for (int j = 0; j < P; ++j)
    for (int b = 0; b < B; ++b)
      for (int p = 0; p < Tl; ++p) {
        const float* src = recv_.data() + size_t(j) * block + (size_t(b) * Tl + p) * width;
        if (!back) {
          const size_t pos = size_t(chunk_position(j, P, p, Tl));
          std::copy_n(src, width, whole + (size_t(b) * T + pos) * width);
        } else {
          float* row = local + (size_t(b) * Tl + p) * size_t(ld);
          for (int i = 0; i < parts; ++i)
            std::copy_n(src + i * run, run, row + offsets[i] + j * run);
        }
      }
}

void UlyssesAttention::attention_forward(float* out, float* state, const float* qkv, int B, int Tl,
                                         int C, int NH) {
  const int P = size(), Ch = C / P, NHh = NH / P, T = Tl * P;
  float* whole = state;  // [B, T, 3 Ch]: q | k | v of this rank's heads
  float* att = state + size_t(B) * T * 3 * Ch;
  const int qkv_at[3] = {0, C, 2 * C}, out_at[1] = {0};
  exchange(const_cast<float*>(qkv), 3 * C, 3, qkv_at, whole, B, Tl, Ch, false);
  y_.resize(size_t(B) * T * Ch);
  layers::attention_forward(y_.data(), att, whole, B, T, Ch, NHh);
  exchange(out, C, 1, out_at, y_.data(), B, Tl, Ch, true);
}

void UlyssesAttention::attention_backward(float* dqkv, const float* dout, const float*,
                                          const float*, const float* state, int B, int Tl, int C,
                                          int NH) {
  const int P = size(), Ch = C / P, NHh = NH / P, T = Tl * P;
  const float* whole = state;
  const float* att = state + size_t(B) * T * 3 * Ch;
  const int qkv_at[3] = {0, C, 2 * C}, out_at[1] = {0};
  dy_.resize(size_t(B) * T * Ch);
  exchange(const_cast<float*>(dout), C, 1, out_at, dy_.data(), B, Tl, Ch, false);
  dqkv_.resize(size_t(B) * T * 3 * Ch);
  scratch_.resize(size_t(T) * T);
  layers::attention_backward(dqkv_.data(), dy_.data(), whole, att, B, T, Ch, NHh, scratch_.data());
  exchange(dqkv, 3 * C, 3, qkv_at, dqkv_.data(), B, Tl, Ch, true);
}

}  // namespace

std::unique_ptr<ContextParallel> make_ulysses_attention(strata::Communicator cp) {
  return std::make_unique<UlyssesAttention>(std::move(cp));
}

}  // namespace gpt
