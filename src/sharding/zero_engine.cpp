// ZeroEngine: one interface over ZeRO stages 0-3 (sharding/zero_engine_impl.hpp): setting up,
// the optimizer step, and the public methods.
#include "sharding/zero_engine_impl.hpp"

namespace strata {

ZeroEngine::Impl::Impl(Communicator comm, std::vector<TensorSpec> tensors, ZeroOptions o)
    : comm_(std::move(comm)), layout_(std::move(tensors), comm_.size()), opt_(o) {
  if (o.stage < 0 || o.stage > 3)
    fail("ZeroEngine", comm_.rank(), "stage " + std::to_string(o.stage) + " (expected 0-3)");
  // Refused here, not met as NaN parameters: beta = 1 makes Adam's bias correction 1 - 1^t = 0.
  const AdamWOptions& a = o.adamw;
  const auto refuse = [&](const char* name, float v, const char* range) {
    fail("ZeroEngine", comm_.rank(),
         std::string("adamw.") + name + " = " + std::to_string(v) + " (expected " + range + ")");
  };
  if (!(a.lr >= 0.0f) || !std::isfinite(a.lr)) refuse("lr", a.lr, "finite, >= 0");
  if (!(a.beta1 >= 0.0f && a.beta1 < 1.0f)) refuse("beta1", a.beta1, "in [0, 1)");
  if (!(a.beta2 >= 0.0f && a.beta2 < 1.0f)) refuse("beta2", a.beta2, "in [0, 1)");
  if (!(a.eps > 0.0f) || !std::isfinite(a.eps)) refuse("eps", a.eps, "finite, > 0");
  if (!(a.weight_decay >= 0.0f) || !std::isfinite(a.weight_decay))
    refuse("weight_decay", a.weight_decay, "finite, >= 0");
  if (!(a.max_grad_norm >= 0.0f) || !std::isfinite(a.max_grad_norm))
    refuse("max_grad_norm", a.max_grad_norm, "finite, >= 0; 0: no clipping");
  const size_t owned = o.stage == 0 ? layout_.padded_numel() : layout_.shard_numel();
  if (o.offload.params && (o.stage != 3 || o.offload.optimizer_dir.empty()))
    fail("ZeroEngine", comm_.rank(),
         "offload.params needs stage 3 (stages 0-2 keep the full parameters) and "
         "offload.optimizer_dir (where the file goes)");
  // SGD keeps no moments: nothing allocated for them, nothing written to a file.
  const bool moments = o.rule == UpdateRule::adamw;
  if (!moments && !o.offload.optimizer_dir.empty() && !o.offload.params)
    fail("ZeroEngine", comm_.rank(),
         "offload.optimizer_dir under UpdateRule::sgd, which keeps no optimizer state to offload "
         "(offload.params, at stage 3, offloads the parameter shard)");
  if (o.offload.optimizer_dir.empty())
    state_ = moments ? StateStore::in_memory(owned) : StateStore::stateless(owned);
  else
    state_ = StateStore::on_disk(owned, moments, o.offload.params, o.offload, comm_.rank());
  if (o.stage < 3)
    full_params_.assign(layout_.padded_numel(), 0.0f);
  else if (!state_->holds_params())
    shard_params_.assign(layout_.shard_numel(), 0.0f);
  bucketer_.emplace(comm_, layout_,
                    o.stage >= 2 ? GradReduction::reduce_scatter : GradReduction::all_reduce,
                    o.buckets);
  // Stage-3 gathers get their own communicator: on the bucketer's they would queue behind
  // the reduce-scatters backward launches, and the next layer's parameters would come late.
  if (o.stage == 3)
    gatherer_.emplace(
        comm_.split(0, comm_.rank(), CommOptions{.name = comm_.name() + "/gather"}), layout_,
        [this](size_t u, float* dst) { read_own_block(u, dst); }, o.prefetch_depth,
        o.resident_below_bytes);
}

void ZeroEngine::Impl::step() {
  await_all_params();  // the update below writes this rank's blocks, which the gathers read
  if (opt_.rule == UpdateRule::adamw || state_->holds_params()) state_->prefetch();
  bucketer_->finish();
  ++steps_;
  const double norm = grad_norm();
  const float scale = sharding::clip_factor(opt_.adamw, norm);
  const bool sgd = opt_.rule == UpdateRule::sgd;
  for_each_owned([&](size_t, size_t own, float* p, const float* g, size_t n) {
    if (sgd && p) return sharding::sgd_update(opt_.adamw, scale, p, g, n);
    for (size_t i = 0; i < n;) {  // a chunk at a time when offloaded
      const StateStore::Slice s = state_->map(own + i);
      const size_t k = std::min(s.n, n - i);
      float* pk = p ? p + i : s.p;  // the parameters are in the store when p is null
      if (sgd)
        sharding::sgd_update(opt_.adamw, scale, pk, g + i, k);
      else
        sharding::adamw_update(opt_.adamw, steps_, scale, pk, g + i, s.m, s.v, k);
      i += k;
    }
  });
  state_->finish();
  if (opt_.stage == 1 || opt_.stage == 2) launch_param_gathers();
  if (gatherer_) gatherer_->invalidate();
  // The step's communication: buckets, gathers and the engine's own collectives.
  StepStats b = bucketer_->take_stats();
  StepStats g = gatherer_ ? gatherer_->take_stats() : StepStats{};
  last_.comm_seconds = b.comm_seconds + g.comm_seconds + own_.comm_seconds;
  last_.exposed_seconds = b.exposed_seconds + g.exposed_seconds + own_.exposed_seconds;
  last_.collectives = b.collectives + g.collectives + own_.collectives;
  last_.bus_bytes = b.bus_bytes + g.bus_bytes + own_.bus_bytes;
  last_.grad_norm = norm;
  own_ = StepStats{};
}

// The global gradient norm: stage 0 holds it all; sharded stages add their shards' squares,
// and the model-parallel peers theirs. Tensors outside the norm (replicas) are skipped.
double ZeroEngine::Impl::grad_norm() {
  if (opt_.adamw.max_grad_norm <= 0) return 0.0;
  std::vector<double> sq(1, 0.0);
  for_each_owned([&](size_t flat, size_t, float*, const float* g, size_t n) {
    for (size_t t = 0; t < layout_.tensors().size(); ++t) {
      if (!layout_.tensors()[t].in_grad_norm) continue;
      const size_t lo = std::max(flat, layout_.tensor_offset(t));
      const size_t hi = std::min(flat + n, layout_.tensor_offset(t) + layout_.tensors()[t].numel());
      for (size_t i = lo; i < hi; ++i) sq[0] += double(g[i - flat]) * double(g[i - flat]);
    }
  });
  if (opt_.stage > 0)
    timed(comm_.all_reduce(buffer(sq), ReduceOp::sum),
          all_reduce_bus_bytes(sizeof(double), comm_.size()));
  if (opt_.grad_norm_group && opt_.grad_norm_group.size() > 1)
    timed(opt_.grad_norm_group.all_reduce(buffer(sq), ReduceOp::sum),
          all_reduce_bus_bytes(sizeof(double), opt_.grad_norm_group.size()));
  return std::sqrt(sq[0]);
}

ZeroEngine::ZeroEngine(Communicator comm, std::vector<TensorSpec> tensors, ZeroOptions options)
    : impl_(std::make_unique<Impl>(std::move(comm), std::move(tensors), options)) {}
ZeroEngine::~ZeroEngine() = default;
const FlatLayout& ZeroEngine::layout() const { return impl_->layout(); }
int ZeroEngine::stage() const { return impl_->stage(); }
void ZeroEngine::set_param(size_t t, std::span<const float> v) { impl_->set_param(t, v); }
void ZeroEngine::begin_forward() { impl_->begin_pass(true); }
void ZeroEngine::begin_backward() { impl_->begin_pass(false); }
void ZeroEngine::gather(size_t u) { impl_->gather(u); }
void ZeroEngine::release(size_t u) { impl_->release(u); }
std::span<const float> ZeroEngine::param(size_t t) { return impl_->param(t); }
std::span<float> ZeroEngine::grad(size_t t) { return impl_->grad(t); }
void ZeroEngine::ready(size_t t) { impl_->ready(t); }
void ZeroEngine::step() { impl_->step(); }
int64_t ZeroEngine::steps_done() const { return impl_->steps_done(); }
void ZeroEngine::set_learning_rate(float lr) { impl_->set_learning_rate(lr); }
std::vector<float> ZeroEngine::full_params() { return impl_->full_params(); }
std::vector<float> ZeroEngine::shard_params() { return impl_->shard_params(); }
void ZeroEngine::set_shard_params(std::span<const float> v) { impl_->set_shard_params(v); }
EngineState ZeroEngine::state() { return impl_->state(); }
void ZeroEngine::set_state(size_t t, std::span<const float> p, std::span<const float> m,
                           std::span<const float> v) {
  impl_->set_state(t, p, m, v);
}
void ZeroEngine::set_steps_done(int64_t steps) { impl_->set_steps_done(steps); }
MemoryReport ZeroEngine::memory() const { return impl_->memory(); }
StepStats ZeroEngine::last_step_stats() const { return impl_->last_step_stats(); }
const std::vector<GatherEvent>& ZeroEngine::gather_events() const { return impl_->gather_events(); }
const std::vector<BucketInfo>& ZeroEngine::buckets() const { return impl_->bucketer().buckets(); }
const GradBucketer& ZeroEngine::bucketer() const { return impl_->bucketer(); }
void ZeroEngine::save(const std::string& dir) { impl_->save(dir); }
void ZeroEngine::load(const std::string& dir) { impl_->load(dir); }

}  // namespace strata
