// ZeroEngine: one interface over ZeRO stages 0-3. What each stage keeps per rank:
//   stage 0: full params, full grads (all-reduce), full moments
//   stage 1: full params, full grads (all-reduce), moments of the shard; params all-gathered
//   stage 2: full params, grad shard (reduce-scatter), moments of the shard; params all-gathered
//   stage 3: param shard (units gathered on demand), grad shard, moments of the shard
// The moments live in a StateStore: in memory, or offloaded to a file (with, at stage 3, the
// parameter shard if asked).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "sharding/adamw.hpp"
#include "sharding/checkpoint.hpp"
#include "sharding/fail.hpp"
#include "sharding/state_store.hpp"
#include "sharding/unit_gatherer.hpp"

namespace strata {

using sharding::fail;
using sharding::StateStore;

class ZeroEngine::Impl {
 public:
  Impl(Communicator comm, std::vector<TensorSpec> tensors, ZeroOptions o)
      : comm_(std::move(comm)), layout_(std::move(tensors), comm_.size()), opt_(o) {
    if (o.stage < 0 || o.stage > 3)
      fail("ZeroEngine", comm_.rank(), "stage " + std::to_string(o.stage) + " (expected 0-3)");
    const size_t owned = o.stage == 0 ? layout_.padded_numel() : layout_.shard_numel();
    if (o.offload.params && (o.stage != 3 || o.offload.optimizer_dir.empty()))
      fail("ZeroEngine", comm_.rank(),
           "offload.params needs stage 3 (stages 0-2 keep the full parameters) and "
           "offload.optimizer_dir (where the file goes)");
    state_ = o.offload.optimizer_dir.empty()
                 ? StateStore::in_memory(owned)
                 : StateStore::on_disk(owned, o.offload.params, o.offload, comm_.rank());
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

  // In-flight parameter gathers write into full_params_: they must end before it is freed.
  ~Impl() {
    for (auto& w : updating_) try {
        if (w) w->wait();
      } catch (const Error&) {  // already reported to whoever waited on the communicator
      }
  }

  const FlatLayout& layout() const { return layout_; }
  int stage() const { return opt_.stage; }
  int rank() const { return comm_.rank(); }

  void set_param(size_t t, std::span<const float> value) {
    check_value(t, "set_param", value);
    await_all_params();
    std::vector<float>& p = opt_.stage < 3 ? full_params_ : shard_params_;
    for_owned_part(opt_.stage < 3, t, [&](size_t own, size_t from, size_t n) {
      if (p.empty())
        state_->write(StateStore::p, own, n, value.data() + from);
      else
        std::copy_n(value.data() + from, n, p.data() + own);
    });
    if (gatherer_) gatherer_->invalidate();
  }

  void set_state(size_t t, std::span<const float> p, std::span<const float> m,
                 std::span<const float> v) {
    set_param(t, p);
    check_value(t, "set_state", m);
    check_value(t, "set_state", v);
    for_owned_part(opt_.stage == 0, t, [&](size_t own, size_t from, size_t n) {
      state_->write(StateStore::m, own, n, m.data() + from);
      state_->write(StateStore::v, own, n, v.data() + from);
    });
  }
  void set_steps_done(int64_t steps) {
    if (steps < 0) fail("ZeroEngine.set_steps_done", rank(), "negative step count");
    steps_ = steps;
  }

  void begin_pass(bool forward) {
    if (gatherer_) gatherer_->set_forward(forward);
    // The moments' first chunks are read behind backward, unless the parameters share the file:
    // then backward's gathers read it, and a read-ahead would be dropped.
    if (!forward && opt_.rule == UpdateRule::adamw && !state_->holds_params()) state_->prefetch();
  }
  void gather(size_t u) {
    if (u >= layout_.num_units()) fail("ZeroEngine.gather", rank(), "no unit " + std::to_string(u));
    if (gatherer_)
      gatherer_->gather(u);
    else
      await_params(u);
  }
  void release(size_t u) {
    if (gatherer_) gatherer_->release(u);
  }
  std::span<const float> param(size_t t) {
    check_tensor(t, "param");
    const TensorSpec& s = layout_.tensors()[t];
    if (opt_.stage < 3) {
      await_params(size_t(s.unit));
      return std::span<const float>(full_params_).subspan(layout_.tensor_offset(t), s.numel());
    }
    const size_t u = size_t(s.unit);
    return gatherer_->unit(u, ("param(" + s.name + ")").c_str())
        .subspan(layout_.tensor_offset(t) - layout_.unit_offset(u), s.numel());
  }
  std::span<float> grad(size_t t) { return bucketer_->grad(t); }
  void ready(size_t t) { bucketer_->ready(t); }

  void step() {
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

  int64_t steps_done() const { return steps_; }
  void set_learning_rate(float lr) {
    if (!(lr >= 0.0f) || !std::isfinite(lr))
      fail("ZeroEngine.set_learning_rate", rank(), "learning rate " + std::to_string(lr));
    opt_.adamw.lr = lr;
  }

  std::vector<float> full_params() {
    await_all_params();
    return opt_.stage < 3 ? gather_owned(full_params_, true) : gather_owned(shard_params(), false);
  }
  EngineState state() {
    EngineState s;
    s.params = full_params();
    s.m = gather_owned(stored(StateStore::m), opt_.stage == 0);
    s.v = gather_owned(stored(StateStore::v), opt_.stage == 0);
    s.steps = steps_;
    return s;
  }

  std::vector<float> shard_params() {
    await_all_params();
    if (opt_.stage < 3) return to_shard(full_params_, true);
    return shard_params_.empty() ? stored(StateStore::p) : shard_params_;
  }
  // Stages 0-2 gather every rank's new blocks into the full parameters as after step(); stage 3
  // drops what it had gathered.
  void set_shard_params(std::span<const float> values) {
    if (values.size() != layout_.shard_numel())
      fail("ZeroEngine.set_shard_params", rank(),
           std::to_string(values.size()) + " values for a shard of " +
               std::to_string(layout_.shard_numel()));
    await_all_params();
    if (opt_.stage == 3) {
      if (shard_params_.empty())
        state_->write(StateStore::p, 0, values.size(), values.data());
      else
        std::copy(values.begin(), values.end(), shard_params_.begin());
      gatherer_->invalidate();
      return;
    }
    for (size_t u = 0; u < layout_.num_units(); ++u)
      std::copy_n(values.data() + layout_.shard_offset(u), layout_.block_numel(u),
                  full_params_.data() + layout_.block_offset(u, rank()));
    launch_param_gathers();
  }

  MemoryReport memory() const {
    MemoryReport r;
    r.param_bytes = opt_.stage < 3
                        ? full_params_.size() * sizeof(float)
                        : shard_params_.size() * sizeof(float) + gatherer_->resident_bytes();
    r.grad_bytes = bucketer_->grad_bytes();
    r.optimizer_bytes = state_->resident_bytes();
    r.offloaded_optimizer_bytes =
        state_->offloaded_bytes(StateStore::m) + state_->offloaded_bytes(StateStore::v);
    r.offloaded_param_bytes = state_->offloaded_bytes(StateStore::p);
    r.peak_gathered_bytes = gatherer_ ? gatherer_->peak_live_bytes() : 0;
    return r;
  }
  StepStats last_step_stats() const { return last_; }
  const std::vector<GatherEvent>& gather_events() const {
    static const std::vector<GatherEvent> none;
    return gatherer_ ? gatherer_->events() : none;
  }
  const GradBucketer& bucketer() const { return *bucketer_; }

  void save(const std::string& dir) {
    await_all_params();
    sharding::ShardState s;
    s.step = steps_;
    s.params = shard_params();
    s.m = to_shard(stored(StateStore::m), opt_.stage == 0);
    s.v = to_shard(stored(StateStore::v), opt_.stage == 0);
    sharding::save_checkpoint(comm_, layout_, opt_.stage, s, dir);
  }

  void load(const std::string& dir) {
    await_all_params();
    sharding::CheckpointReader in(dir, layout_, rank());
    using R = sharding::CheckpointReader;
    for (size_t u = 0; u < layout_.num_units(); ++u) {
      const size_t so = layout_.shard_offset(u), blk = layout_.block_numel(u);
      const size_t fo = layout_.unit_offset(u), own = size_t(rank()) * blk;
      const size_t at = opt_.stage == 0 ? fo : so,
                   n = opt_.stage == 0 ? layout_.unit_numel(u) : blk;
      std::vector<float> tmp(n);
      if (opt_.stage < 3) {
        in.read(R::params, u, 0, layout_.unit_numel(u), full_params_.data() + fo);
      } else if (shard_params_.empty()) {
        in.read(R::params, u, own, blk, tmp.data());
        state_->write(StateStore::p, so, blk, tmp.data());
      } else {
        in.read(R::params, u, own, blk, shard_params_.data() + so);
      }
      in.read(R::moment1, u, opt_.stage == 0 ? 0 : own, n, tmp.data());
      state_->write(StateStore::m, at, n, tmp.data());
      in.read(R::moment2, u, opt_.stage == 0 ? 0 : own, n, tmp.data());
      state_->write(StateStore::v, at, n, tmp.data());
    }
    steps_ = in.step();
    if (gatherer_) gatherer_->invalidate();
  }

 private:
  void check_value(size_t t, const char* op, std::span<const float> value) const {
    check_tensor(t, op);
    const TensorSpec& s = layout_.tensors()[t];
    if (value.size() != s.numel())
      fail(std::string("ZeroEngine.") + op, comm_.rank(),
           "tensor " + s.name + " has " + std::to_string(s.numel()) + " elements, got " +
               std::to_string(value.size()));
  }

  // The part of tensor t that per-rank storage keeps, as f(offset there, offset into the tensor,
  // elements): all of it when `full` (padded flat), else what lies in this rank's block of the
  // tensor's unit, in shard space.
  template <typename F>
  void for_owned_part(bool full, size_t t, F f) const {
    const size_t off = layout_.tensor_offset(t), n = layout_.tensors()[t].numel();
    if (full) return f(off, 0, n);
    const size_t u = size_t(layout_.tensors()[t].unit), lo = layout_.block_offset(u, rank());
    const size_t a = std::max(off, lo), b = std::min(off + n, lo + layout_.block_numel(u));
    if (a < b) f(layout_.shard_offset(u) + a - lo, a - off, b - a);
  }

  // Stage 3: this rank's block of unit u's parameters, for the gatherer.
  void read_own_block(size_t u, float* dst) {
    const size_t so = layout_.shard_offset(u), blk = layout_.block_numel(u);
    if (shard_params_.empty())
      state_->read(StateStore::p, so, blk, dst);
    else
      std::copy_n(shard_params_.data() + so, blk, dst);
  }

  // One array's whole owned storage in the store (a copy, in memory for the caller's while).
  std::vector<float> stored(StateStore::Array which) {
    std::vector<float> out(state_->size());
    state_->read(which, 0, out.size(), out.data());
    return out;
  }

  // This rank's block of every unit from per-rank storage (`full`: padded flat) in shard space.
  std::vector<float> to_shard(const std::vector<float>& owned, bool full) const {
    if (!full) return owned;
    std::vector<float> s(layout_.shard_numel());
    for (size_t u = 0; u < layout_.num_units(); ++u)
      std::copy_n(owned.data() + layout_.block_offset(u, rank()), layout_.block_numel(u),
                  s.data() + layout_.shard_offset(u));
    return s;
  }

  // Collective when sharded: the unpadded values of per-rank storage (`full` padded flat, or
  // shard space) in tensor order.
  std::vector<float> gather_owned(const std::vector<float>& owned, bool full) {
    std::vector<float> out;
    out.reserve(layout_.numel());
    if (full) {
      for (size_t t = 0; t < layout_.tensors().size(); ++t) {
        auto v = std::span<const float>(owned).subspan(layout_.tensor_offset(t),
                                                       layout_.tensors()[t].numel());
        out.insert(out.end(), v.begin(), v.end());
      }
      return out;
    }
    const size_t S = layout_.shard_numel();
    std::vector<float> all(S * size_t(comm_.size()));
    comm_.all_gather(Buffer{const_cast<float*>(owned.data()), S, DataType::f32}, buffer(all))
        .wait();
    for (size_t u = 0; u < layout_.num_units(); ++u) {
      const size_t blk = layout_.block_numel(u);
      for (size_t i = 0; i < layout_.unit_real_numel(u); ++i)
        out.push_back(all[(i / blk) * S + layout_.shard_offset(u) + i % blk]);
    }
    return out;
  }

  void check_tensor(size_t t, const char* op) const {
    if (t >= layout_.tensors().size())
      fail(std::string("ZeroEngine.") + op, comm_.rank(),
           "no tensor " + std::to_string(t) + " (" + std::to_string(layout_.tensors().size()) +
               " tensors)");
  }

  // Calls f(flat index, owned index, param, grad, n) on each contiguous slice this rank updates;
  // the owned index is where its moments are.
  template <typename F>
  void for_each_owned(F f) {
    const int r = rank();
    for (size_t u = 0; u < layout_.num_units(); ++u) {
      const size_t so = layout_.shard_offset(u), blk = layout_.block_numel(u);
      const size_t fo = layout_.block_offset(u, r);
      switch (opt_.stage) {
        case 0: {
          const size_t o = layout_.unit_offset(u), n = layout_.unit_numel(u);
          f(o, o, full_params_.data() + o, bucketer_->full_grads().data() + o, n);
          break;
        }
        case 1:
          f(fo, so, full_params_.data() + fo, bucketer_->full_grads().data() + fo, blk);
          break;
        case 2:
          f(fo, so, full_params_.data() + fo, bucketer_->shard_grads().data() + so, blk);
          break;
        default:  // null: the parameters are in the store
          f(fo, so, shard_params_.empty() ? nullptr : shard_params_.data() + so,
            bucketer_->shard_grads().data() + so, blk);
      }
    }
  }

  // The global gradient norm: stage 0 holds it all; sharded stages add their shards' squares,
  // and the model-parallel peers theirs. Tensors outside the norm (replicas) are skipped.
  double grad_norm() {
    if (opt_.adamw.max_grad_norm <= 0) return 0.0;
    std::vector<double> sq(1, 0.0);
    for_each_owned([&](size_t flat, size_t, float*, const float* g, size_t n) {
      for (size_t t = 0; t < layout_.tensors().size(); ++t) {
        if (!layout_.tensors()[t].in_grad_norm) continue;
        const size_t lo = std::max(flat, layout_.tensor_offset(t));
        const size_t hi =
            std::min(flat + n, layout_.tensor_offset(t) + layout_.tensors()[t].numel());
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

  // Stages 1 and 2: each unit's updated blocks are all-gathered in place into the full
  // parameters. The gathers run on while the trainer starts its next forward pass; the first
  // read of a unit (gather() or param()) waits for its gather, so only that wait is exposed.
  void launch_param_gathers() {
    updating_.resize(layout_.num_units());
    for (size_t u = 0; u < layout_.num_units(); ++u) {
      const size_t blk = layout_.block_numel(u);
      updating_[u] = comm_.all_gather(
          Buffer{full_params_.data() + layout_.block_offset(u, rank()), blk, DataType::f32},
          Buffer{full_params_.data() + layout_.unit_offset(u), layout_.unit_numel(u),
                 DataType::f32});
    }
  }
  void await_params(size_t u) {
    if (u >= updating_.size() || !updating_[u]) return;
    std::optional<Work> w = std::move(updating_[u]);
    updating_[u].reset();
    timed(*w, gather_bus_bytes(layout_.unit_numel(u) * sizeof(float), comm_.size()));
  }
  void await_all_params() {
    for (size_t u = 0; u < updating_.size(); ++u) await_params(u);
  }

  // Waits on w, counting the wait as exposed communication.
  void timed(const Work& w, double bus_bytes) {
    own_.bus_bytes += bus_bytes;
    const auto t0 = std::chrono::steady_clock::now();
    w.wait();
    own_.exposed_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    own_.comm_seconds += w.elapsed_seconds();
    ++own_.collectives;
  }

  Communicator comm_;
  FlatLayout layout_;
  ZeroOptions opt_;
  std::vector<float> full_params_, shard_params_;
  std::unique_ptr<StateStore> state_;
  std::optional<GradBucketer> bucketer_;
  std::optional<sharding::UnitGatherer> gatherer_;
  std::vector<std::optional<Work>> updating_;  // stages 1-2: parameter gathers still in flight
  int64_t steps_ = 0;
  StepStats last_, own_;
};

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
