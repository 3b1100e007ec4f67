// The reference GPT's activations and forward passes, composed from the kernels in
// gpt_layers.cpp (backward: gpt_backward.cpp; shapes and initialisation: gpt_config.cpp). Read
// gpt_model.hpp first for the unit order and the gradient conventions.
#include "model/gpt_model.hpp"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <utility>

#include "model/gpt_layers.hpp"
#include "model/model_internals.hpp"

namespace gpt {

namespace L = layers;

Model::Model(const Config& c, int batch, const ModelOptions& o)
    : c_(c),
      B_(batch),
      recompute_(o.recompute),
      first_(o.first_layer),
      last_(o.last_layer < 0 ? c.layers : o.last_layer),
      tp_(o.tp),
      ep_(o.ep),
      cp_(o.cp) {
  check_config(c);
  if (batch < 1) throw std::invalid_argument("gpt::Model: batch must be positive");
  if (first_ < 0 || first_ >= last_ || last_ > c.layers)
    throw std::invalid_argument("gpt::Model: blocks [" + std::to_string(first_) + ", " +
                                std::to_string(last_) + ") outside the model's " +
                                std::to_string(c.layers));
  if (o.slots < 1) throw std::invalid_argument("gpt::Model: slots must be positive");
  if (tp_ && c.experts > 0 && batch % tp_->size() != 0)
    throw std::invalid_argument(
        "gpt::Model: a mixture of experts under tp=" + std::to_string(tp_->size()) +
        " routes whole sequences, and " + std::to_string(batch) + " do not divide over tp");
  if (ep_ && c.experts % ep_->size() != 0)
    throw std::invalid_argument("gpt::Model: " + std::to_string(c.experts) +
                                " experts do not divide over " + std::to_string(ep_->size()) +
                                " expert-parallel ranks");
  const int cp = cp_ ? cp_->size() : 1;
  if (cp_ && c.ctx % (2 * cp) != 0)
    throw std::invalid_argument("context parallelism: the sequence of " + std::to_string(c.ctx) +
                                " positions does not split into 2 cp = " + std::to_string(2 * cp) +
                                " chunks");
  if (tp_ && tp_->sequence_parallel() && c.ctx / cp % tp_->size() != 0)
    throw std::invalid_argument("sequence parallelism: the sequence of " +
                                std::to_string(c.ctx / cp) + " positions" +
                                (cp_ ? " (on each cp rank)" : "") +
                                " does not divide by tp=" + std::to_string(tp_->size()));
  default_blas_threads();
  const Dims d = dims_of(c, batch, tp_, ep_, cp_);
  s_ = std::make_unique<State>(d);
  State& s = *s_;
  if (cp_)
    for (int p = 0; p < d.T; ++p) s.pos.push_back(cp_->position(p, d.T));
  const size_t N = d.N, Nl = d.Nl, C = d.C, blocks = size_t(last_ - first_);
  s.shapes.resize(size_t(c.layers) + 2);
  for (const auto& t : expert_local_specs(tp_ ? tp_->local_specs(c) : param_specs(c), d.P))
    s.shapes[size_t(t.unit)].emplace_back(t.name, t.numel());
  s.slots.resize(size_t(o.slots));
  for (Slot& sl : s.slots) {
    sl.tokens.resize(N);
    sl.targets.resize(N);
    sl.res.assign(blocks + 1, std::vector<float>(Nl * C));
    if (!recompute_) {
      for (int l = first_; l < last_; ++l) sl.acts.emplace_back(d, !c.moe_block(l), c.moe_block(l));
    }
    if (has_head()) {
      sl.lnf.resize(Nl * C), sl.lnf_mean.resize(Nl), sl.lnf_rstd.resize(Nl);
      sl.logits.resize(N * d.Vl), sl.probs.resize(N * d.Vl);
    }
  }
  s.cur = &s.slots[0];
  bool dense = false, experts = false;
  for (int l = first_; l < last_; ++l) (c.moe_block(l) ? experts : dense) = true;
  if (recompute_) s.shared.emplace_back(d, dense, experts);
  if (experts) s.moe = std::make_unique<moe::Scratch>(d.Bx, d.T, d.C, d.E, d.k, d.P);
  s.dres.resize(Nl * C);
  s.dbtc.resize(N * C);
  s.partial.resize(N * C);
  if (tp_ && tp_->sequence_parallel()) s.full.resize(N * C), s.rows.resize(Nl * C);
  s.dqkv.resize(N * 3 * d.Cl);
  s.dfch.resize(N * d.Hl);
  if (has_head()) s.dlogits.resize(N * d.Vl);
  s.datt.resize(size_t(d.T) * d.T);
  s.dsum.resize(std::max(size_t(d.Tg) * C, 4 * C));
}

Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

size_t Model::activation_bytes() const { return s_->bytes(); }

void Model::select(int slot) {
  if (slot < 0 || size_t(slot) >= s_->slots.size())
    throw std::out_of_range("gpt::Model::select: slot " + std::to_string(slot) + " of " +
                            std::to_string(s_->slots.size()));
  s_->cur = &s_->slots[size_t(slot)];
}

std::span<float> Model::input() { return s_->cur->res.front(); }
std::span<const float> Model::output() const { return s_->cur->res.back(); }
std::span<float> Model::output_grad() { return s_->dres; }
std::span<const float> Model::input_grad() const { return s_->dres; }

void Model::check_layer(const char* where, int l) const {
  if (l < first_ || l >= last_)
    throw std::invalid_argument(std::string("gpt::Model::") + where + ": layer " +
                                std::to_string(l) + " outside [" + std::to_string(first_) + ", " +
                                std::to_string(last_) + ")");
}

// ---- forward -----------------------------------------------------------------------------------

void Model::embed(std::span<const int> tokens, const Params& unit0) {
  check_part("embed", has_embed(), "embeddings");
  check_unit("embed", s_->shapes, 0, unit0);
  State& s = *s_;
  const Dims& d = s.d;
  local_tokens("embed", tokens, d, s.cur->tokens);
  float* out = s.cur->res[0].data();
  const int* pos = s.pos.empty() ? nullptr : s.pos.data();
  if (!tp_) {
    L::embed_forward(out, s.cur->tokens.data(), unit0[0].data(), unit0[1].data(), d.N, d.T, d.C,
                     pos);
    return;
  }
  // Vocabulary-parallel: the rows of tokens in this rank's slice, zero for the others, summed
  // over the group (g), then the position embedding of each row this rank holds.
  for (int n = 0; n < d.N; ++n) {
    float* p = s.partial.data() + size_t(n) * d.C;
    const int tok = s.cur->tokens[n];
    if (tok < 0)
      std::fill(p, p + d.C, 0.0f);
    else
      std::copy_n(unit0[0].data() + size_t(tok) * d.C, d.C, p);
  }
  const float* red = Regions{tp_, d}.leave(s.partial.data(), s.rows.data());
  for (int i = 0; i < d.Nl; ++i) {
    const int t = tp_->position(size_t(i), d.T);
    const float* pe = unit0[1].data() + size_t(pos ? pos[t] : t) * d.C;
    for (int k = 0; k < d.C; ++k) out[size_t(i) * d.C + k] = red[size_t(i) * d.C + k] + pe[k];
  }
}

namespace internal {

void block_forward(BlockActs& a, float* out, const float* x, const Params& p, const Dims& d,
                   const Regions& reg, const BlockScratch& s, bool experts) {
  const int N = d.N, Nl = d.Nl, C = d.C;
  L::layernorm_forward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), x, p[LN1W].data(),
                       p[LN1B].data(), Nl, C);
  L::matmul_forward(a.qkv.data(), reg.enter(a.ln1.data(), s.full), p[ATTNW].data(), p[ATTNB].data(),
                    N, C, 3 * d.Cl);
  if (reg.cp)
    reg.cp->attention_forward(a.atty.data(), a.att.data(), a.qkv.data(), d.B, d.T, d.Cl, d.NHl);
  else
    L::attention_forward(a.atty.data(), a.att.data(), a.qkv.data(), d.B, d.T, d.Cl, d.NHl);
  L::matmul_forward(s.partial, a.atty.data(), p[PROJW].data(), nullptr, N, d.Cl, C);
  residual_add(a.res2.data(), x, p[PROJB].data(), reg.leave(s.partial, s.rows), Nl, C);
  L::layernorm_forward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.res2.data(),
                       p[LN2W].data(), p[LN2B].data(), Nl, C);
  if (experts) {  // out = res2 + experts(ln2): this rank's sequences, then every tp rank's
    const size_t at = reg.share_offset();
    moe::forward(*a.moe, s.partial + at, reg.enter(a.ln2.data(), s.full) + at, p[ROUTERW].data(),
                 {p[EFCW].data(), p[EFCB].data(), p[EFCPROJW].data(), p[EFCPROJB].data()},
                 d.capacity, reg.ep, reg.cp);
    reg.gather_shares(s.partial);
    for (size_t i = 0; i < size_t(Nl); ++i) {
      const float *r = a.res2.data() + i * C, *e = s.partial + reg.row_of(i) * C;
      for (int k = 0; k < C; ++k) out[i * C + k] = r[k] + e[k];
    }
    return;
  }
  L::matmul_forward(a.fch.data(), reg.enter(a.ln2.data(), s.full), p[FCW].data(), p[FCB].data(), N,
                    C, d.Hl);
  L::gelu_forward(a.fch_gelu.data(), a.fch.data(), size_t(N) * d.Hl);
  L::matmul_forward(s.partial, a.fch_gelu.data(), p[FCPROJW].data(), nullptr, N, d.Hl, C);
  residual_add(out, a.res2.data(), p[FCPROJB].data(), reg.leave(s.partial, s.rows), Nl, C);
}

}  // namespace internal

void Model::block(int l, const Params& p) {
  check_layer("block", l);
  check_unit("block", s_->shapes, 1 + l, p);
  State& s = *s_;
  const int i = l - first_;
  BlockActs& a = s.acts(i);
  block_forward(a, s.cur->res[size_t(i) + 1].data(), s.cur->res[size_t(i)].data(), p, s.d,
                Regions{tp_, s.d, ep_, cp_}, {s.partial.data(), s.full.data(), s.rows.data()},
                c_.moe_block(l));
  if (i == 0) s.cur->aux = 0;
  // Under tp each rank's aux loss is the mean over its share of the sequences: its part of the
  // whole is that share's fraction of it.
  if (c_.moe_block(l)) s.cur->aux += double(c_.aux_loss_coef) * a.moe->r.aux * s.d.Bx / s.d.B;
}

float Model::aux_loss() const { return float(s_->cur->aux); }
Model::ExpertStats Model::expert_stats(int l) const {
  check_layer("expert_stats", l);
  if (!c_.moe_block(l))
    throw std::logic_error("gpt::Model::expert_stats: block " + std::to_string(l) +
                           " has no experts");
  const moe::Acts& a = *s_->acts(l - first_).moe;
  ExpertStats st;
  for (int e = 0; e < a.E; ++e)
    st.tokens.push_back(a.o.first[size_t(e) + 1] - a.o.first[size_t(e)]);
  st.dropped = a.r.dropped;
  return st;
}

float Model::head(std::span<const int> targets, const Params& lnf, std::span<const float> wte) {
  check_part("head", has_head(), "head");
  State& s = *s_;
  const Dims& d = s.d;
  Slot& sl = *s.cur;
  check_unit("head", s.shapes, c_.layers + 1, lnf);
  check_span("head", "wte", wte, size_t(d.Vl) * d.C);
  sl.have_targets = !targets.empty();
  if (sl.have_targets) local_tokens("head", targets, d, sl.targets);
  L::layernorm_forward(sl.lnf.data(), sl.lnf_mean.data(), sl.lnf_rstd.data(), sl.res.back().data(),
                       lnf[0].data(), lnf[1].data(), d.Nl, d.C);
  // Tied head: logits[N, Vl] = lnf[N, C] wte[Vl, C]^T (this rank's vocabulary slice).
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, d.N, d.Vl, d.C, 1.0f,
              Regions{tp_, d}.enter(sl.lnf.data(), s.full.data()), d.C, wte.data(), d.C, 0.0f,
              sl.logits.data(), d.Vl);
  const int* tg = sl.have_targets ? targets.data() : nullptr;
  const double total =
      tp_ ? tp_->cross_entropy(sl.probs.data(), sl.logits.data(), tg, d.N, d.Vl, d.vfirst, d.V)
          : L::crossentropy_forward(sl.probs.data(), sl.logits.data(), tg, d.N, d.V);
  return sl.have_targets ? float(total / d.N) : std::numeric_limits<float>::quiet_NaN();
}

std::span<const float> Model::logits(int b, int t) const {
  if ((tp_ && tp_->size() > 1) || cp_)
    throw std::logic_error(
        "gpt::Model::logits: each rank holds only a slice of the vocabulary or the sequence");
  check_part("logits", has_head(), "head");
  if (b < 0 || b >= B_ || t < 0 || t >= c_.ctx)
    throw std::out_of_range("gpt::Model::logits: (" + std::to_string(b) + ", " + std::to_string(t) +
                            ") outside the batch");
  const size_t V = c_.vocab;
  return {s_->cur->logits.data() + (size_t(b) * c_.ctx + t) * V, V};
}

}  // namespace gpt
