// The reference GPT's backward passes (gpt_model.hpp states the gradient conventions): head,
// blocks (recomputing a block's forward first under activation checkpointing) and embeddings.
#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "model/gpt_layers.hpp"
#include "model/gpt_model.hpp"
#include "model/model_internals.hpp"

namespace gpt {

namespace L = layers;

// ---- backward ----------------------------------------------------------------------------------

void Model::head_backward(const Params& lnf, std::span<const float> wte, const Grads& lnf_grad,
                          std::span<float> wte_grad, float grad_scale, bool accumulate) {
  check_part("head_backward", has_head(), "head");
  State& s = *s_;
  const Dims& d = s.d;
  Slot& sl = *s.cur;
  if (!sl.have_targets)
    throw std::logic_error("gpt::Model::head_backward: head() ran without targets");
  check_unit("head_backward", s.shapes, c_.layers + 1, lnf);
  check_unit("head_backward", s.shapes, c_.layers + 1, lnf_grad);
  check_span("head_backward", "wte", wte, size_t(d.Vl) * d.C);
  check_span("head_backward", "the wte gradient", wte_grad, size_t(d.Vl) * d.C);
  const Regions reg{tp_, d};
  s.grad_scale = grad_scale;  // the auxiliary loss enters in the blocks, scaled alike
  // The loss is the mean over N positions and every gradient is scaled by grad_scale: both enter
  // here, at the top, and flow down through every backward.
  L::crossentropy_backward(s.dlogits.data(), sl.probs.data(), sl.targets.data(), d.N, d.Vl,
                           grad_scale / float(d.N));
  // dwte (+)= dlogits^T lnf ;  dlnf = dlogits wte (partial sums over the vocabulary slices)
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d.Vl, d.C, d.N, 1.0f, s.dlogits.data(), d.Vl,
              reg.enter(sl.lnf.data(), s.full.data()), d.C, accumulate ? 1.0f : 0.0f,
              wte_grad.data(), d.C);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d.N, d.C, d.Vl, 1.0f, s.dlogits.data(),
              d.Vl, wte.data(), d.C, 0.0f, s.partial.data(), d.C);
  const float* dlnf = reg.leave(s.partial.data(), s.rows.data());
  // The residual stream's gradient starts here (written, not added).
  std::fill(s.dres.begin(), s.dres.end(), 0.0f);
  L::layernorm_backward(s.dres.data(), lnf_grad[0].data(), lnf_grad[1].data(), dlnf,
                        sl.res.back().data(), lnf[0].data(), sl.lnf_mean.data(), sl.lnf_rstd.data(),
                        d.Nl, d.C, accumulate, s.dsum.data());
}

void Model::set_grad_scale(float grad_scale) { s_->grad_scale = grad_scale; }

void Model::block_backward(int l, const Params& p, const Grads& g, bool accumulate) {
  check_layer("block_backward", l);
  check_unit("block_backward", s_->shapes, 1 + l, p);
  check_unit("block_backward", s_->shapes, 1 + l, g);
  State& s = *s_;
  const Dims& d = s.d;
  const int N = d.N, Nl = d.Nl, C = d.C, i = l - first_;
  const Regions reg{tp_, d, ep_, cp_};
  BlockActs& a = s.acts(i);
  const float* x = s.cur->res[size_t(i)].data();
  // Activation checkpointing: rebuild this block's activations from its kept input. Same inputs,
  // same code: bit-identical to the forward pass. Only the output (already kept) is discarded.
  const bool experts = c_.moe_block(l);
  if (recompute_)
    block_forward(a, s.dbtc.data(), x, p, d, reg, {s.partial.data(), s.full.data(), s.rows.data()},
                  experts);

  float* dres = s.dres.data();  // in: d(block output); out: d(block input)
  double* sum = s.dsum.data();
  if (experts) {
    // out = res2 + experts(ln2(res2)): d(ln2) of this rank's sequences (all of them without tp)
    // into partial, every tp rank's gathered, this rank's rows of it into the LayerNorm's
    // backward. Under sequence parallelism both ln2 and d(out) are gathered first (into full and
    // dbtc, free until the attention's backward). The router's and experts' gradients cover
    // this rank's sequences: the trainer sums them over tp.
    const size_t at = reg.share_offset();
    const float* dout = reg.enter(dres, s.dbtc.data()) + at;
    const float* ln2 = reg.enter(a.ln2.data(), s.full.data()) + at;
    std::fill(s.partial.begin(), s.partial.end(), 0.0f);
    moe::backward(
        s.partial.data() + at, g[ROUTERW].data(),
        {g[EFCW].data(), g[EFCB].data(), g[EFCPROJW].data(), g[EFCPROJB].data()}, dout, *a.moe, ln2,
        p[ROUTERW].data(), {p[EFCW].data(), p[EFCB].data(), p[EFCPROJW].data(), p[EFCPROJB].data()},
        c_.aux_loss_coef * s.grad_scale * float(d.Bx) / float(d.B), accumulate, *s.moe, ep_);
    reg.gather_shares(s.partial.data());
    const float* dln2 = s.partial.data();
    if (Nl != N) {  // sequence parallelism: this rank's rows
      for (size_t i = 0; i < size_t(Nl); ++i)
        std::copy_n(s.partial.data() + reg.row_of(i) * C, C, s.rows.data() + i * C);
      dln2 = s.rows.data();
    }
    L::layernorm_backward(dres, g[LN2W].data(), g[LN2B].data(), dln2, a.res2.data(), p[LN2W].data(),
                          a.ln2_mean.data(), a.ln2_rstd.data(), Nl, C, accumulate, sum);
  } else {
    // out = res2 + fcproj(gelu(fc(ln2(res2)))): the MLP branch, last op first. Sequence
    // parallelism gathers the rows of each gradient leaving a region, and re-gathers each
    // column-parallel input instead of keeping it (as Megatron does).
    L::matmul_backward(s.dfch.data(), g[FCPROJW].data(), g[FCPROJB].data(),
                       reg.enter(dres, s.full.data()), a.fch_gelu.data(), p[FCPROJW].data(), N,
                       d.Hl, C, accumulate, false, sum);
    L::gelu_backward(s.dfch.data(), a.fch.data(), s.dfch.data(), size_t(N) * d.Hl);
    L::matmul_backward(s.partial.data(), g[FCW].data(), g[FCB].data(), s.dfch.data(),
                       reg.enter(a.ln2.data(), s.full.data()), p[FCW].data(), N, C, d.Hl,
                       accumulate, false, sum);
    // d(res2) = d(out) (residual path, already in dres) + the LayerNorm path, added in place.
    L::layernorm_backward(dres, g[LN2W].data(), g[LN2B].data(),
                          reg.leave(s.partial.data(), s.rows.data()), a.res2.data(), p[LN2W].data(),
                          a.ln2_mean.data(), a.ln2_rstd.data(), Nl, C, accumulate, sum);
  }
  // res2 = x + proj(attention(qkv(ln1(x)))): the attention branch.
  L::matmul_backward(s.dbtc.data(), g[PROJW].data(), g[PROJB].data(),
                     reg.enter(dres, s.full.data()), a.atty.data(), p[PROJW].data(), N, d.Cl, C,
                     accumulate, false, sum);
  if (reg.cp)
    reg.cp->attention_backward(s.dqkv.data(), s.dbtc.data(), a.qkv.data(), a.atty.data(),
                               a.att.data(), d.B, d.T, d.Cl, d.NHl);
  else
    L::attention_backward(s.dqkv.data(), s.dbtc.data(), a.qkv.data(), a.att.data(), d.B, d.T, d.Cl,
                          d.NHl, s.datt.data());
  L::matmul_backward(s.partial.data(), g[ATTNW].data(), g[ATTNB].data(), s.dqkv.data(),
                     reg.enter(a.ln1.data(), s.full.data()), p[ATTNW].data(), N, C, 3 * d.Cl,
                     accumulate, false, sum);
  L::layernorm_backward(dres, g[LN1W].data(), g[LN1B].data(),
                        reg.leave(s.partial.data(), s.rows.data()), x, p[LN1W].data(),
                        a.ln1_mean.data(), a.ln1_rstd.data(), Nl, C, accumulate, sum);
}

void Model::embed_backward(const Grads& unit0_grad, bool accumulate) {
  check_part("embed_backward", has_embed(), "embeddings");
  check_unit("embed_backward", s_->shapes, 0, unit0_grad);
  State& s = *s_;
  const Dims& d = s.d;
  // All rows of the gradient: wte's rows of this rank's tokens, and wpe's over every sequence.
  L::embed_backward(unit0_grad[0].data(), unit0_grad[1].data(),
                    Regions{tp_, d}.enter(s.dres.data(), s.full.data()), s.cur->tokens.data(), d.N,
                    d.T, d.C, accumulate, s.dsum.data(), s.pos.empty() ? nullptr : s.pos.data(),
                    d.Tg);
}

}  // namespace gpt
