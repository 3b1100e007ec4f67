// Mixture of experts (docs/trainer.md, "Mixture of experts"): a softmax router over E experts,
// top-k routing with an optional capacity, E expert MLPs (the block's MLP, one per expert), and
// the load-balancing loss, forward and backward over flat fp32 buffers like gpt_layers.hpp.
//
// Routing is a pure function of one sequence's router logits: a token takes its k most probable
// experts (ties: the lower expert id), its gates are those probabilities renormalised over the k;
// with a capacity factor c each expert takes at most ceil(c T k / E) of a sequence's
// assignments, the most probable first (ties: the earlier position), and drops the rest (a
// dropped assignment adds nothing; the residual carries the token on). Capacity and the
// auxiliary loss are per sequence (GShard's groups), so any split of a batch into micro-batches
// or ranks routes and drops exactly what one rank routes and drops. Under context parallelism a
// rank holds only some positions of each sequence: the per-sequence loads and probability sums
// are summed over the cp ranks, and a capacity ranks every rank's assignments of the sequence.
//
// The auxiliary loss is coef times the mean over sequences of E sum_e f_e P_e (Switch
// Transformer): f_e the share of the sequence's T k assignments that chose expert e (before
// dropping; a constant for the gradient), P_e the mean router probability of e over the sequence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpt {
class ContextSplit;
}

namespace gpt::moe {

/// Most experts a token may take (gpt::Config checks).
constexpr int kMaxTopK = 64;

/// One micro-batch's routing of B sequences of T rows over E experts, k each; the sequences are
/// Tg positions long (T of them here, Tg / T ranks holding the others under cp).
struct Routing {
  int B = 0, T = 0, Tg = 0, E = 0, k = 0;
  std::vector<float> probs;   ///< [N, E] the router's softmax
  std::vector<int> expert;    ///< [N, k] chosen experts, most probable first
  std::vector<float> gate;    ///< [N, k] their probabilities renormalised over the k
  std::vector<uint8_t> kept;  ///< [N, k] 0 where the capacity dropped the assignment
  std::vector<int> load;      ///< [B, E] assignments per whole sequence and expert, before dropping
  long dropped = 0;           ///< assignments of these rows dropped
  double aux = 0;             ///< mean over sequences of E sum_e f_e P_e (without the coef)
};

/// Routes the rows of `logits` [B T, E] (softmax, top-k, capacity: the comment above).
/// `capacity` <= 0: dropless. `cp`: the ranks holding the sequences' other positions (collective
/// over them), or null.
void route(Routing& r, const float* logits, int B, int T, int E, int k, double capacity,
           ContextSplit* cp = nullptr);

/// Assignments kept, grouped by expert (ascending), rows ascending within one: where each
/// assignment's row sits in the experts' buffers, and each expert's first row there.
struct Order {
  std::vector<int> slot;   ///< [kept] assignment index n * k + j, in expert order
  std::vector<int> pos;    ///< [N k] position in expert order, -1 when dropped
  std::vector<int> first;  ///< [E + 1] each expert's first position; first[E] = kept
};
void order(Order& o, const Routing& r);

/// Where the experts are: every rank of an expert-parallel group holds E / size() of them
/// (experts in rank order), and rows travel to them and back through this (parallel/
/// expert_parallel.hpp implements it over the ep group); null: every expert is local.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual int size() const = 0;
  /// `mine` [E]: the rows this rank sends each expert; `theirs` [size() * E / size()] receives at
  /// i * (E / size()) + l the rows rank i sends my l-th expert.
  virtual void counts(const std::vector<int32_t>& mine, std::vector<int32_t>& theirs) = 0;
  /// Sends send_rows[j] rows of `width` floats to rank j (consecutive in `send`, ranks in order)
  /// and receives recv_rows[i] rows from rank i into `recv` (ranks in order).
  virtual void rows(const float* send, const std::vector<size_t>& send_rows, float* recv,
                    const std::vector<size_t>& recv_rows, int width) = 0;
};

/// This rank's experts' parameters, stacked: its l-th expert's fc_w is rows [l 4C, (l + 1) 4C)
/// of fc_w (E / size() experts under an Exchange, all E without).
struct Experts {
  const float *fc_w, *fc_b, *fcproj_w, *fcproj_b;  // [El 4C, C], [El 4C], [El C, 4C], [El C]
};
struct ExpertGrads {
  float *fc_w, *fc_b, *fcproj_w, *fcproj_b;
};

/// One MoE layer's activations on N rows of C channels (hidden H = 4C), sized once for the
/// most assignments it can hold, so the passes allocate nothing: N k rows leave this rank, and
/// its experts may receive N k rows from each of `ranks` ranks.
struct Acts {
  int B, T, C, E, k, ranks;
  Routing r;
  Order o;
  std::vector<float> logits;      // [N, E]
  std::vector<float> xin, y;      // [N k, C]: the rows sent (in Order), their outputs back
  std::vector<float> recv;        // [ranks N k, C]: rows as they arrive, by source rank
  std::vector<float> ein, h, hg;  // [ranks N k, C or H]: my experts' rows, by expert
  std::vector<float> ey;          // [ranks N k, C]: their outputs
  // The exchange's layout: rows to and from each rank, rows from each rank for each of my
  // experts, where each of my experts' rows start in ein, and ein's row q is recv's perm[q].
  std::vector<size_t> to_rank, from_rank;
  std::vector<int32_t> sent, from;
  std::vector<int> lfirst, perm;
  Acts(int B, int T, int C, int E, int k, int ranks = 1);
  size_t bytes() const;
};

/// out[N, C] = sum over kept assignments of gate times the expert's MLP of x's row; x [N, C] is
/// the LayerNorm's output, router_w [E, C]; `cp` as route's.
void forward(Acts& a, float* out, const float* x, const float* router_w, const Experts& p,
             double capacity, Exchange* ex = nullptr, ContextSplit* cp = nullptr);

/// Scratch of backward for the Acts of the same arguments (R = ranks N k rows).
struct Scratch {
  std::vector<float> dy, drecv, dey, dh, dlogits;  // [N k, C], [R, C], [R, C], [R, H], [N, E]
  std::vector<double> sum;                         // [max(4C, E)]
  Scratch(int B, int T, int C, int E, int k, int ranks = 1);
};

/// dx[N, C] += the gradient through the layer of dout [N, C] (and the auxiliary loss, weighted
/// `aux_scale`: coef times the loss's scale); parameter gradients (the router's, this rank's
/// experts') written, or added with `accumulate`.
void backward(float* dx, float* drouter_w, const ExpertGrads& g, const float* dout, const Acts& a,
              const float* x, const float* router_w, const Experts& p, float aux_scale,
              bool accumulate, Scratch& s, Exchange* ex = nullptr);

}  // namespace gpt::moe
