// ZeroEngine's state whole (state(), set_state()) or sharded (shard_params()), and its
// checkpoints, which each rank writes and reads as its shard (sharding/checkpoint.hpp).
#include "sharding/checkpoint.hpp"
#include "sharding/zero_engine_impl.hpp"

namespace strata {

void ZeroEngine::Impl::set_state(size_t t, std::span<const float> p, std::span<const float> m,
                                 std::span<const float> v) {
  set_param(t, p);
  check_value(t, "set_state", m);
  check_value(t, "set_state", v);
  for_owned_part(opt_.stage == 0, t, [&](size_t own, size_t from, size_t n) {
    state_->write(StateStore::m, own, n, m.data() + from);
    state_->write(StateStore::v, own, n, v.data() + from);
  });
}

EngineState ZeroEngine::Impl::state() {
  EngineState s;
  s.params = full_params();
  s.m = gather_owned(stored(StateStore::m), opt_.stage == 0);
  s.v = gather_owned(stored(StateStore::v), opt_.stage == 0);
  s.steps = steps_;
  return s;
}

std::vector<float> ZeroEngine::Impl::shard_params() {
  await_all_params();
  if (opt_.stage < 3) return to_shard(full_params_, true);
  return shard_params_.empty() ? stored(StateStore::p) : shard_params_;
}

// Stages 0-2 gather every rank's new blocks into the full parameters as after step(); stage 3
// drops what it had gathered.
void ZeroEngine::Impl::set_shard_params(std::span<const float> values) {
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

void ZeroEngine::Impl::save(const std::string& dir) {
  await_all_params();
  sharding::ShardState s;
  s.step = steps_;
  s.params = shard_params();
  s.m = to_shard(stored(StateStore::m), opt_.stage == 0);
  s.v = to_shard(stored(StateStore::v), opt_.stage == 0);
  sharding::save_checkpoint(comm_, layout_, opt_.stage, s, dir);
}

void ZeroEngine::Impl::load(const std::string& dir) {
  await_all_params();
  sharding::CheckpointReader in(dir, layout_, rank());
  using R = sharding::CheckpointReader;
  for (size_t u = 0; u < layout_.num_units(); ++u) {
    const size_t so = layout_.shard_offset(u), blk = layout_.block_numel(u);
    const size_t fo = layout_.unit_offset(u), own = size_t(rank()) * blk;
    const size_t at = opt_.stage == 0 ? fo : so, n = opt_.stage == 0 ? layout_.unit_numel(u) : blk;
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

// One array's whole owned storage in the store (a copy, in memory for the caller's while).
std::vector<float> ZeroEngine::Impl::stored(StateStore::Array which) {
  std::vector<float> out(state_->size());
  state_->read(which, 0, out.size(), out.data());
  return out;
}

// This rank's block of every unit from per-rank storage (`full`: padded flat) in shard space.
std::vector<float> ZeroEngine::Impl::to_shard(const std::vector<float>& owned, bool full) const {
  if (!full) return owned;
  std::vector<float> s(layout_.shard_numel());
  for (size_t u = 0; u < layout_.num_units(); ++u)
    std::copy_n(owned.data() + layout_.block_offset(u, rank()), layout_.block_numel(u),
                s.data() + layout_.shard_offset(u));
  return s;
}

// Collective when sharded: the unpadded values of per-rank storage (`full` padded flat, or
// shard space) in tensor order.
std::vector<float> ZeroEngine::Impl::gather_owned(const std::vector<float>& owned, bool full) {
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
  comm_.all_gather(Buffer{const_cast<float*>(owned.data()), S, DataType::f32}, buffer(all)).wait();
  for (size_t u = 0; u < layout_.num_units(); ++u) {
    const size_t blk = layout_.block_numel(u);
    for (size_t i = 0; i < layout_.unit_real_numel(u); ++i)
      out.push_back(all[(i / blk) * S + layout_.shard_offset(u) + i % blk]);
  }
  return out;
}

}  // namespace strata
