// The reference GPT's kernels: each forward next to its backward, over flat row-major fp32 buffers,
// in the spirit of llm.c. N is the number of rows (B*T positions), C the channels. These are
// internal to trainer/ (gpt_model.cpp composes them); nothing here allocates.
//
// Gradient conventions, shared by every backward below:
//   - activation gradients `dinp` are ADDED to (a block's input gradient collects the residual
//     path and the LayerNorm path), except where a function says it writes;
//   - parameter gradients are written when `accumulate` is false and added to when it is true;
//   - sums over the N rows (bias and LayerNorm gradients, the loss) are taken in double, so the
//     result hardly depends on how a global batch is sliced into micro-batches.
#pragma once

#include <cstddef>

namespace gpt::layers {

/// out[n] = wte[tokens[n]] + wpe[pos(n % T)]: sequences of T rows, row t at position pos[t] of
/// wpe's (t when pos is null: context parallelism holds a subset of the positions).
void embed_forward(float* out, const int* tokens, const float* wte, const float* wpe, int N, int T,
                   int C, const int* pos = nullptr);
/// dwte[tokens[n]] += dout[n] (always adds: the tied head wrote its part first), skipping tokens
/// below 0 (another rank's slice of the vocabulary);
/// dwpe[p] (+)= sum over sequences of dout[b, t] with pos(t) = p, for wpe's Tw rows (Tw = T and
/// pos the identity when pos is null).
void embed_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int N, int T,
                    int C, bool accumulate, double* scratch /* Tw*C */, const int* pos = nullptr,
                    int Tw = 0);

/// out = (inp - mean) * rstd * w + b per row; mean and rstd (1/sqrt(var + 1e-5)) kept for backward.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                       const float* b, int N, int C);
/// dinp += d/dinp; dw, db (+)= their sums over rows.
void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, const float* mean, const float* rstd, int N, int C,
                        bool accumulate, double* scratch /* 2*C */);

/// out[N, OC] = residual + inp[N, C] w[OC, C]^T + b (residual and b may be null): one sgemm.
void matmul_forward(float* out, const float* inp, const float* w, const float* b, int N, int C,
                    int OC, const float* residual = nullptr);
/// dinp[N, C] = dout w (written, or added when dinp_add); dw (+)= dout^T inp; db (+)= sum dout.
void matmul_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                     const float* w, int N, int C, int OC, bool accumulate, bool dinp_add,
                     double* scratch /* OC */);

/// Causal multi-head self-attention of one layer. qkv [B, T, 3C] holds q | k | v, head h in
/// columns h*hs .. (h+1)*hs of each. att [B, NH, T, T] keeps the softmax probabilities (zero above
/// the diagonal); out [B, T, C] are the heads' outputs side by side.
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH);
/// dqkv is written. scratch: T*T floats.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int B,
                        int T, int C, int NH, float* scratch);

/// GELU, tanh approximation (as GPT-2): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void gelu_forward(float* out, const float* inp, size_t n);
/// dinp = dout * gelu'(inp); dinp may alias dout.
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n);

/// Softmax of each row of logits [N, V] into probs; returns the SUM over rows of
/// -log probs[n, targets[n]] (double).
double crossentropy_forward(float* probs, const float* logits, const int* targets, int N, int V);
/// dlogits = scale * (probs - onehot(targets)) (written); a target below 0 (in another rank's
/// slice of the vocabulary) has no column here.
void crossentropy_backward(float* dlogits, const float* probs, const int* targets, int N, int V,
                           float scale);

}  // namespace gpt::layers
