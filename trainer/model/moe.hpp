// Mixture of experts (docs/trainer.md, "Mixture of experts"): a softmax router over E experts,
// top-k routing with an optional capacity, E expert MLPs (the block's MLP, one per expert), and
// the load-balancing loss, forward and backward over flat fp32 buffers like gpt_layers.hpp.
//
// Routing is a pure function of one sequence's router logits: a token takes its k most probable
// experts (ties: the lower expert id), its gates are those probabilities renormalised over the k;
// with a capacity factor c each expert takes at most ceil(c T k / E) of a sequence's
// assignments, the most probable first (ties: the earlier token), and drops the rest (a dropped
// assignment adds nothing; the residual carries the token on). Capacity and the auxiliary loss
// are per sequence (GShard's groups), so any split of a batch into micro-batches or ranks routes
// and drops exactly what one rank routes and drops.
//
// The auxiliary loss is coef times the mean over sequences of E sum_e f_e P_e (Switch
// Transformer): f_e the share of the sequence's T k assignments that chose expert e (before
// dropping; a constant for the gradient), P_e the mean router probability of e over the sequence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpt::moe {

/// Most experts a token may take (gpt::Config checks).
constexpr int kMaxTopK = 64;

/// One micro-batch's routing of B sequences of T rows over E experts, k each.
struct Routing {
  int B = 0, T = 0, E = 0, k = 0;
  std::vector<float> probs;   ///< [N, E] the router's softmax
  std::vector<int> expert;    ///< [N, k] chosen experts, most probable first
  std::vector<float> gate;    ///< [N, k] their probabilities renormalised over the k
  std::vector<uint8_t> kept;  ///< [N, k] 0 where the capacity dropped the assignment
  std::vector<int> load;      ///< [B, E] assignments per sequence and expert, before dropping
  long dropped = 0;           ///< assignments dropped
  double aux = 0;             ///< mean over sequences of E sum_e f_e P_e (without the coef)
};

/// Routes the rows of `logits` [B T, E] (softmax, top-k, capacity: the comment above).
/// `capacity` <= 0: dropless.
void route(Routing& r, const float* logits, int B, int T, int E, int k, double capacity);

/// Assignments kept, grouped by expert (ascending), rows ascending within one: where each
/// assignment's row sits in the experts' buffers, and each expert's first row there.
struct Order {
  std::vector<int> slot;   ///< [kept] assignment index n * k + j, in expert order
  std::vector<int> pos;    ///< [N k] position in expert order, -1 when dropped
  std::vector<int> first;  ///< [E + 1] each expert's first position; first[E] = kept
};
void order(Order& o, const Routing& r);

/// The experts' parameters, stacked: expert e's fc_w is rows [e 4C, (e + 1) 4C) of fc_w.
struct Experts {
  const float *fc_w, *fc_b, *fcproj_w, *fcproj_b;  // [E 4C, C], [E 4C], [E C, 4C], [E C]
};
struct ExpertGrads {
  float *fc_w, *fc_b, *fcproj_w, *fcproj_b;
};

/// One MoE layer's activations on N rows of C channels (hidden H = 4C), sized once for the
/// most assignments it can hold (N k), so the passes allocate nothing.
struct Acts {
  int B, T, C, E, k;
  Routing r;
  Order o;
  std::vector<float> logits;      // [N, E]
  std::vector<float> xin, h, hg;  // [N k, C], [N k, H], [N k, H]: the experts' rows
  std::vector<float> y;           // [N k, C]: the experts' outputs
  Acts(int B, int T, int C, int E, int k);
  size_t bytes() const;
};

/// out[N, C] = sum over kept assignments of gate times the expert's MLP of x's row; x [N, C] is
/// the LayerNorm's output, router_w [E, C].
void forward(Acts& a, float* out, const float* x, const float* router_w, const Experts& p, int C,
             double capacity);

/// Scratch of backward: dy rows, dh rows [N k, max(C, H)] each, the router's gradients.
struct Scratch {
  std::vector<float> dy, dh, dlogits;  // [N k, C], [N k, H], [N, E]
  std::vector<double> sum;             // [max(4C, E)]
  Scratch(int N, int C, int E, int k);
};

/// dx[N, C] += the gradient through the layer of dout [N, C] (and the auxiliary loss, weighted
/// `aux_scale`: coef times the loss's scale); parameter gradients written, or added with
/// `accumulate`.
void backward(float* dx, float* drouter_w, const ExpertGrads& g, const float* dout, const Acts& a,
              const float* x, const float* router_w, const Experts& p, int C, float aux_scale,
              bool accumulate, Scratch& s);

}  // namespace gpt::moe
