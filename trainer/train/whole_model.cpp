// The whole model from every rank's slices: its parameters (checks, sampling), its checkpoint
// (any layout writes it, any layout resumes from it) and whether replicas stayed bit-identical.
#include <algorithm>
#include <stdexcept>

#include "train/model_checkpoint.hpp"
#include "train/trainer_impl.hpp"

namespace gpt {

namespace {

uint64_t fingerprint(const std::vector<float>& v) {  // FNV-1a over the bytes
  uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Where each tensor starts in the whole model, and (last) its size.
std::vector<size_t> offsets(const std::vector<strata::TensorSpec>& specs) {
  std::vector<size_t> at(specs.size() + 1, 0);
  for (size_t t = 0; t < specs.size(); ++t) at[t + 1] = at[t] + specs[t].numel();
  return at;
}

}  // namespace

// The whole model from per-tensor values laid out as this rank's engine lays its tensors out
// (unpadded, in order): each slice placed into param_specs order by one rank holding it (dp
// and cp coordinate 0, tp rank 0 for a replicated tensor, ep rank 0 for a dense one, never the tied
// copy), then summed over the world, where every other rank adds zeros, so the sum is exact.
std::vector<float> Trainer::Impl::whole(const std::vector<float>& local) {
  const auto specs = param_specs(o.model);
  const std::vector<size_t> offset = offsets(specs);
  std::vector<float> out(offset.back(), 0.0f);
  const bool writer = mesh.coord(strata::Dim::dp) == 0 && mesh.coord(strata::Dim::cp) == 0;
  const int tpr = mesh.coord(strata::Dim::tp), epr = mesh.coord(strata::Dim::ep);
  const auto& lay = engine.layout();
  size_t at = 0;
  for (size_t t = 0; t < global_tensor.size(); ++t) {
    const size_t n = lay.tensors()[t].numel(), g = size_t(global_tensor[t]);
    const std::span<const float> mine(local.data() + at, n);
    at += n;
    if (!writer || lay.tensors()[t].unit == wte_copy) continue;
    if (is_expert_tensor(specs[g].name)) {  // this rank's block of the experts (whole over tp)
      if (tpr == 0)
        std::copy(mine.begin(), mine.end(), out.begin() + long(offset[g] + n * size_t(epr)));
      continue;
    }
    const bool replicated = tp_split(specs[g].name) == TpSplit::replicated;
    if (epr == 0 && (tpr == 0 || !replicated))
      tp_place(o.model, g, mine, o.tp, tpr,
               std::span<float>(out.data() + offset[g], specs[g].numel()));
  }
  metrics.all_reduce(strata::buffer(out), strata::ReduceOp::sum).wait();
  return out;
}

std::vector<float> Trainer::parameters() { return impl_->whole(impl_->engine.full_params()); }

bool Trainer::replicas_identical() {
  Impl& I = *impl_;
  const auto& lay = I.engine.layout();
  const std::vector<float> mine = I.engine.full_params();
  // Four fingerprints, each compared across the group that must hold equal copies.
  std::vector<float> replicated, dense, tied;
  size_t at = 0;
  for (size_t t = 0; t < lay.tensors().size(); ++t) {
    const size_t n = lay.tensors()[t].numel();
    const bool is_wte = I.global_tensor[t] == 0;
    const auto first = mine.begin() + long(at), last = mine.begin() + long(at + n);
    if (tp_split(lay.tensors()[t].name) == TpSplit::replicated)
      replicated.insert(replicated.end(), first, last);
    if (!is_expert_tensor(lay.tensors()[t].name)) dense.insert(dense.end(), first, last);
    if (is_wte) tied.assign(mine.begin() + long(at), mine.begin() + long(at + n));
    at += n;
  }
  auto same_across = [](strata::Communicator& g, const std::vector<float>& v) {
    if (!g || g.size() == 1) return true;
    std::vector<int64_t> h{int64_t(fingerprint(v))}, all(size_t(g.size()));
    g.all_gather(strata::buffer(h), strata::buffer(all)).wait();
    return std::all_of(all.begin(), all.end(), [&](int64_t x) { return x == all[0]; });
  };
  std::vector<int> ok{
      same_across(I.replicas, mine) && same_across(I.mesh.group(strata::Dim::tp), replicated) &&
      same_across(I.mesh.group(strata::Dim::ep), dense) && same_across(I.tied, tied)};
  I.metrics.all_reduce(strata::buffer(ok), strata::ReduceOp::min).wait();
  return ok[0] == 1;
}

void Trainer::save(const std::string& dir) {
  Impl& I = *impl_;
  if (I.diloco) return I.save_islands(dir);
  const std::string error = I.write_whole(dir);
  if (!error.empty()) throw std::runtime_error(error);
}

void Trainer::load(const std::string& dir) {
  Impl& I = *impl_;
  if (I.diloco) return I.load_islands(dir);
  if (const int k = saved_islands(dir); k > 0)
    throw std::invalid_argument("checkpoint " + dir + " holds " + std::to_string(k) +
                                " islands (DiLoCo): resume it with --islands " + std::to_string(k));
  I.read_whole(dir);
}

// One rank writes; every rank of the island learns whether it could (the error, or ""), so none
// goes on believing it saved.
std::string Trainer::Impl::write_whole(const std::string& dir) {
  const strata::EngineState st = engine.state();
  const WholeState w{o.model, st.steps, whole(st.params), whole(st.m), whole(st.v)};
  std::string error;
  if (metrics.rank() == 0) try {
      write_checkpoint(dir, w);
    } catch (const std::exception& e) {
      error = e.what();
    }
  std::vector<int> ok{error.empty() ? 1 : 0};
  metrics.broadcast(strata::buffer(ok), 0).wait();
  if (!ok[0] && error.empty()) error = "checkpoint: rank 0 could not write " + dir;
  return error;
}

void Trainer::Impl::read_whole(const std::string& dir) {
  Impl& I = *this;
  const WholeState w = read_checkpoint(dir);
  const Config& c = I.o.model;
  if (w.model.vocab != c.vocab || w.model.ctx != c.ctx || w.model.layers != c.layers ||
      w.model.heads != c.heads || w.model.embd != c.embd || w.model.experts != c.experts ||
      (c.experts > 0 && w.model.moe_every != c.moe_every))
    throw std::invalid_argument(
        "checkpoint " + dir + " holds another model (L " + std::to_string(w.model.layers) + ", H " +
        std::to_string(w.model.heads) + ", C " + std::to_string(w.model.embd) + ", T " +
        std::to_string(w.model.ctx) + ", V " + std::to_string(w.model.vocab) + ", experts " +
        std::to_string(w.model.experts) + " every " + std::to_string(w.model.moe_every) + ")");
  const auto specs = param_specs(c);
  const std::vector<size_t> offset = offsets(specs);
  for (size_t t = 0; t < I.global_tensor.size(); ++t) {
    const size_t g = size_t(I.global_tensor[t]);
    auto slice = [&](const std::vector<float>& all) {
      return I.slice(g, std::span(all).subspan(offset[g], specs[g].numel()));
    };
    I.engine.set_state(t, slice(w.params), slice(w.m), slice(w.v));
  }
  I.engine.set_steps_done(w.step);
}

}  // namespace gpt
