// ZeroEngine's implementation: its members and short methods here; setting up and the step in
// zero_engine.cpp; the state whole or sharded, and checkpoints, in zero_engine_state.cpp. What
// each stage keeps per rank:
//   stage 0: full params, full grads (all-reduce), full moments
//   stage 1: full params, full grads (all-reduce), moments of the shard; params all-gathered
//   stage 2: full params, grad shard (reduce-scatter), moments of the shard; params all-gathered
//   stage 3: param shard (units gathered on demand), grad shard, moments of the shard
// The moments live in a StateStore: in memory, or offloaded to a file (with, at stage 3, the
// parameter shard if asked).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "sharding/adamw.hpp"
#include "sharding/fail.hpp"
#include "sharding/state_store.hpp"
#include "sharding/unit_gatherer.hpp"

namespace strata {

using sharding::fail;
using sharding::StateStore;

class ZeroEngine::Impl {
 public:
  Impl(Communicator comm, std::vector<TensorSpec> tensors, ZeroOptions o);

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
                 std::span<const float> v);
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

  void step();

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
  EngineState state();

  std::vector<float> shard_params();
  // Stages 0-2 gather every rank's new blocks into the full parameters as after step(); stage 3
  // drops what it had gathered.
  void set_shard_params(std::span<const float> values);

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

  void save(const std::string& dir);

  void load(const std::string& dir);

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
  std::vector<float> stored(StateStore::Array which);

  // This rank's block of every unit from per-rank storage (`full`: padded flat) in shard space.
  std::vector<float> to_shard(const std::vector<float>& owned, bool full) const;

  // Collective when sharded: the unpadded values of per-rank storage (`full` padded flat, or
  // shard space) in tensor order.
  std::vector<float> gather_owned(const std::vector<float>& owned, bool full);

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
  double grad_norm();

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

}  // namespace strata
