// The model's internals, shared by its three files (gpt_config.cpp: shapes, initialisation and
// BLAS threads; gpt_model.cpp: activations and forward; gpt_backward.cpp: backward): the block's
// tensors, the sizes one rank computes with, the activations each micro-batch keeps, the edges of
// the parallel regions and the argument checks. Only model/ includes it.
#pragma once

#include <algorithm>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "model/gpt_layers.hpp"
#include "model/gpt_model.hpp"
#include "model/moe.hpp"

namespace gpt {
namespace internal {

// Per-block tensors in unit order, with their shapes in terms of C.
struct BlockTensor {
  const char* name;
  int rows_in_c;  // rows as a multiple of C (0: a vector)
  int cols_in_c;  // columns (or vector length) as a multiple of C
};
constexpr BlockTensor kBlock[] = {{"ln1_w", 0, 1},  {"ln1_b", 0, 1},    {"attn_w", 3, 1},
                                  {"attn_b", 0, 3}, {"proj_w", 1, 1},   {"proj_b", 0, 1},
                                  {"ln2_w", 0, 1},  {"ln2_b", 0, 1},    {"fc_w", 4, 1},
                                  {"fc_b", 0, 4},   {"fcproj_w", 1, 4}, {"fcproj_b", 0, 1}};
constexpr int kBlockTensors = 12;
// Indices into a block unit's Params.
enum { LN1W, LN1B, ATTNW, ATTNB, PROJW, PROJB, LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB };
// A mixture-of-experts block's MLP tensors instead (after LN2B; param_specs gives the shapes).
enum { ROUTERW = LN2B + 1, EFCW, EFCB, EFCPROJW, EFCPROJB };

inline void check_config(const Config& c) {
  if (c.vocab < 1 || c.ctx < 1 || c.layers < 1 || c.heads < 1 || c.embd < 1)
    throw std::invalid_argument("gpt::Config: every dimension must be positive");
  if (c.embd % c.heads != 0)
    throw std::invalid_argument("gpt::Config: embd " + std::to_string(c.embd) +
                                " does not divide by heads " + std::to_string(c.heads));
  if (c.experts < 0 || c.moe_every < 1 || !(c.capacity_factor >= 0) || !(c.aux_loss_coef >= 0))
    throw std::invalid_argument(
        "gpt::Config: experts, capacity and the aux loss coefficient must be >= 0, moe_every >= 1");
  if (c.experts > 0 && (c.top_k < 1 || c.top_k > std::min(c.experts, moe::kMaxTopK)))
    throw std::invalid_argument("gpt::Config: top-k " + std::to_string(c.top_k) +
                                " must be between 1 and the experts (" + std::to_string(c.experts) +
                                ")");
}

// The sizes one rank computes with. Under tensor parallelism attention heads, MLP units and the
// vocabulary are this rank's share; under sequence parallelism the LayerNorm and residual
// regions hold `Nl` of the `N` rows.
struct Dims {
  int B, T, C, N, Nl;  // sequences, positions, channels, rows, rows held in the residual regions
  int Tg;              // positions of a whole sequence (T is this rank's under cp)
  int Cl, NHl, Hl;     // attention width and heads, MLP width of this rank
  int V, Vl, vfirst;   // vocabulary, this rank's share of the padded vocabulary, its first id
  int E, k;            // experts and experts per token (mixture-of-experts blocks)
  int P;               // ranks the experts are split over (1: all here)
  int Bx, xfirst;      // the sequences this rank routes to them (its tp share) and the first
  double capacity;     // their capacity factor (0: dropless)
  size_t att;          // floats attention keeps per block (probabilities, or cp's state)
};

inline Dims dims_of(const Config& c, int B, ModelParallel* tp, moe::Exchange* ep,
                    ContextSplit* cp) {
  const int t = tp ? tp->size() : 1, r = tp ? tp->rank() : 0;
  Dims d;
  d.Tg = c.ctx;
  d.B = B, d.T = c.ctx / (cp ? cp->size() : 1), d.C = c.embd, d.N = B * d.T;
  d.Nl = tp ? int(tp->local_rows(B, d.T)) : d.N;
  d.Cl = c.embd / t, d.NHl = c.heads / t, d.Hl = 4 * c.embd / t;
  d.V = c.vocab, d.Vl = tp ? tp->vocab_share(c.vocab) : c.vocab, d.vfirst = r * d.Vl;
  d.E = c.experts, d.k = c.top_k, d.capacity = c.capacity_factor, d.P = ep ? ep->size() : 1;
  d.Bx = B / t, d.xfirst = r * d.Bx;
  d.att = cp ? cp->state_floats(B, d.T, d.Cl, d.NHl) : size_t(B) * d.NHl * d.T * d.T;
  return d;
}

// One block's activations. Without recompute there is one per layer and slot; with recompute a
// single one is shared: block() fills it on the way forward (only the output is kept) and
// block_backward() fills it again from the block's input.
struct BlockActs {
  std::vector<float> ln1, ln1_mean, ln1_rstd;  // [Nl, C], [Nl], [Nl]
  std::vector<float> qkv;                      // [N, 3 Cl]
  std::vector<float> att;   // [B, NHl, T, T] softmax probabilities (cp: its state)
  std::vector<float> atty;  // [N, Cl] attention output before the projection
  std::vector<float> res2;  // [Nl, C] residual after attention
  std::vector<float> ln2, ln2_mean, ln2_rstd;  // [Nl, C], [Nl], [Nl]
  std::vector<float> fch, fch_gelu;            // [N, Hl]: the MLP's (none in a MoE block)
  std::unique_ptr<moe::Acts> moe;              // a mixture-of-experts block's

  // `mlp`: the block has the dense MLP; `experts`: a mixture of experts (recompute's shared set
  // may need both).
  BlockActs(const Dims& d, bool mlp, bool experts)
      : ln1(size_t(d.Nl) * d.C),
        ln1_mean(d.Nl),
        ln1_rstd(d.Nl),
        qkv(size_t(d.N) * 3 * d.Cl),
        att(d.att),
        atty(size_t(d.N) * d.Cl),
        res2(size_t(d.Nl) * d.C),
        ln2(size_t(d.Nl) * d.C),
        ln2_mean(d.Nl),
        ln2_rstd(d.Nl),
        fch(mlp ? size_t(d.N) * d.Hl : 0),
        fch_gelu(fch.size()),
        moe(experts ? std::make_unique<moe::Acts>(d.Bx, d.T, d.C, d.E, d.k, d.P) : nullptr) {}
  size_t bytes() const {
    size_t n = 0;
    for (const auto* v : {&ln1, &ln1_mean, &ln1_rstd, &qkv, &att, &atty, &res2, &ln2, &ln2_mean,
                          &ln2_rstd, &fch, &fch_gelu})
      n += v->size();
    return n * sizeof(float) + (moe ? moe->bytes() : 0);
  }
};

// What one micro-batch keeps from forward to backward.
struct Slot {
  std::vector<int> tokens;   // [N] ids in this rank's vocabulary slice, -1 if not
  std::vector<int> targets;  // [N] the same for the targets
  bool have_targets = false;
  std::vector<std::vector<float>> res;  // blocks + 1 of [Nl, C]: res[i] is block first+i's input
  std::vector<BlockActs> acts;          // one per block, none with recompute
  std::vector<float> lnf, lnf_mean, lnf_rstd;  // head only: [Nl, C], [Nl], [Nl]
  std::vector<float> logits, probs;            // head only: [N, Vl]
  double aux = 0;  // the MoE blocks' load-balancing loss in the last forward (coef included)
  size_t bytes() const {
    size_t n = (tokens.size() + targets.size()) * sizeof(int);
    for (const auto& r : res) n += r.size() * sizeof(float);
    for (const auto& a : acts) n += a.bytes();
    for (const auto* v : {&lnf, &lnf_mean, &lnf_rstd, &logits, &probs})
      n += v->size() * sizeof(float);
    return n;
  }
};

// The edges of the parallel regions (model_parallel.hpp): without tensor parallelism rows are
// all local and partial sums are already whole. Mixture-of-experts rows leave through `ep`.
struct Regions {
  ModelParallel* tp;
  const Dims& d;
  moe::Exchange* ep = nullptr;
  ContextSplit* cp = nullptr;
  const float* enter(const float* local, float* full) const {
    return tp ? tp->gather_rows(local, full, d.B, d.T, d.C) : local;
  }
  float* leave(float* partial, float* rows) const {
    return tp ? tp->reduce_rows(partial, rows, d.B, d.T, d.C) : partial;
  }
  // Which of all B*T rows this rank's residual row i is (sequence parallelism holds a run of
  // each sequence's positions).
  size_t row_of(size_t i) const {
    if (!tp || d.Nl == d.N) return i;
    const size_t run = size_t(d.Nl / d.B);
    return i / run * size_t(d.T) + size_t(tp->position(i, d.T));
  }
  // A mixture-of-experts block's shares of the sequences: under tp each rank routes B / tp
  // whole sequences (routing, capacity and the aux loss are per sequence), written at their rows
  // of `all` [N, C]; this gathers every rank's. Rows replicated over tp are dispatched once.
  void gather_shares(float* all) const {
    if (tp) tp->all_gather_sequences(all, size_t(d.Bx) * d.T * d.C);
  }
  size_t share_offset() const { return size_t(d.xfirst) * d.T * d.C; }
};

// out = (x + b) + red, row by row: the residual, the bias of a row-parallel matmul (added once,
// after the reduction) and the reduced product.
inline void residual_add(float* out, const float* x, const float* b, const float* red, int rows,
                         int C) {
  for (int n = 0; n < rows; ++n) {
    const size_t o = size_t(n) * C;
    for (int i = 0; i < C; ++i) out[o + i] = (x[o + i] + b[i]) + red[o + i];
  }
}

}  // namespace internal

using namespace internal;

struct Model::State {
  Dims d;
  std::vector<int> pos;  // context parallelism: each local position's place in its sequence
  std::vector<std::vector<std::pair<std::string, size_t>>> shapes;  // per unit: (name, elements)
  std::vector<Slot> slots;
  Slot* cur = nullptr;
  std::vector<BlockActs> shared;  // recompute: the one set every block refills
  // Backward scratch, shared by all layers and slots.
  std::vector<float> dres;            // [Nl, C]: gradient of the residual stream
  std::vector<float> dbtc;            // [N, C]: the attention output's gradient; a discard
  std::vector<float> partial;         // [N, C]: a row-parallel product before its reduction
  std::vector<float> full, rows;      // sequence parallelism: [N, C] gathered, [Nl, C] reduced
  std::vector<float> dqkv;            // [N, 3 Cl]
  std::vector<float> dfch;            // [N, Hl]
  std::vector<float> dlogits;         // [N, Vl]
  std::vector<float> datt;            // [T, T]
  std::vector<double> dsum;           // sums over rows: max(T*C, 4C)
  std::unique_ptr<moe::Scratch> moe;  // mixture-of-experts blocks' backward scratch
  float grad_scale = 1;               // head_backward's: the auxiliary loss's gradient takes it

  explicit State(const Dims& dims) : d(dims) {}
  BlockActs& acts(int i) { return shared.empty() ? cur->acts[size_t(i)] : shared[0]; }
  size_t bytes() const {
    size_t n = 0;
    for (const auto& s : slots) n += s.bytes();
    for (const auto& a : shared) n += a.bytes();
    for (const auto* v : {&dres, &dbtc, &partial, &full, &rows, &dqkv, &dfch, &dlogits, &datt})
      n += v->size() * sizeof(float);
    return n + dsum.size() * sizeof(double);
  }
};

namespace internal {

template <class Span>
void check_span(const char* where, const std::string& what, const Span& sp, size_t want) {
  if (sp.size() != want)
    throw std::invalid_argument(std::string("gpt::Model::") + where + ": " + what + " has " +
                                std::to_string(sp.size()) + " elements, expected " +
                                std::to_string(want));
}

// The expected tensors of each unit (name, elements), from Model::State.
using UnitShapes = std::vector<std::vector<std::pair<std::string, size_t>>>;

template <class Spans>
void check_unit(const char* where, const UnitShapes& shapes, int unit, const Spans& spans) {
  const auto& mine = shapes[size_t(unit)];
  if (spans.size() != mine.size())
    throw std::invalid_argument(std::string("gpt::Model::") + where + ": unit " +
                                std::to_string(unit) + " has " + std::to_string(mine.size()) +
                                " tensors, got " + std::to_string(spans.size()) + " spans");
  for (size_t i = 0; i < mine.size(); ++i)
    check_span(where, mine[i].first, spans[i], mine[i].second);
}

// Checks global token ids and stores them as ids in this rank's vocabulary slice (-1: another's).
inline void local_tokens(const char* where, std::span<const int> t, const Dims& d,
                         std::vector<int>& out) {
  check_span(where, "the token span", t, size_t(d.N));
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] < 0 || t[i] >= d.V)
      throw std::invalid_argument(std::string("gpt::Model::") + where + ": token " +
                                  std::to_string(t[i]) + " at position " + std::to_string(i) +
                                  " is outside [0, " + std::to_string(d.V) + ")");
    out[i] = t[i] >= d.vfirst && t[i] < d.vfirst + d.Vl ? t[i] - d.vfirst : -1;
  }
}

inline void check_part(const char* where, bool has, const char* what) {
  if (!has)
    throw std::logic_error(std::string("gpt::Model::") + where + ": this part has no " + what);
}

// Scratch a block's passes use besides its activations.
struct BlockScratch {
  float *partial, *full, *rows;
};

// One block's forward from its input x [Nl, C] into out [Nl, C], keeping what backward needs in
// a. Column-parallel matmuls take all rows (entering), row-parallel ones leave partial sums
// that are reduced before the bias and the residual are added. A mixture-of-experts block
// (`moe`) routes ln2's rows to its experts instead of the MLP (its share of the sequences under
// tensor parallelism, Regions::gather_shares).
void block_forward(BlockActs& a, float* out, const float* x, const Params& p, const Dims& d,
                   const Regions& reg, const BlockScratch& s, bool moe);

}  // namespace internal
}  // namespace gpt
