// DiLoCo's outer optimizer and the split of a job into islands (strata/diloco.hpp).
#include "strata/diloco.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>

#include "sharding/checkpoint.hpp"
#include "sharding/diloco_impl.hpp"
#include "sharding/fail.hpp"
#include "sharding/outer_codec.hpp"

namespace strata {

Islands split_islands(Communicator& world, int k) {
  if (k < 1 || world.size() % k != 0)
    sharding::fail("split_islands", world.rank(),
                   std::to_string(k) + " islands do not divide the " +
                       std::to_string(world.size()) + " ranks");
  Islands is;
  const int per = world.size() / k;
  is.count = k;
  is.index = world.rank() / per;
  is.island = world.split(is.index, world.rank(),
                          CommOptions{.name = world.name() + "/island" + std::to_string(is.index)});
  is.across =
      world.split(world.rank() % per, is.index, CommOptions{.name = world.name() + "/islands"});
  is.store = world.store();
  return is;
}

void DiLoCo::Impl::check() {
  const auto bad = [&](const std::string& what) {
    const Communicator& g = across ? across : o.island;  // a joiner has no `across` yet
    sharding::fail("DiLoCo", g.rank(), what + " (group " + g.name() + ")");
  };
  if (o.outer_every < 1)
    bad("outer_every " + std::to_string(o.outer_every) + " (expected 1 or more)");
  if (!(o.lr > 0.0f) || !std::isfinite(o.lr))
    bad("outer lr " + std::to_string(o.lr) + " (expected above 0)");
  if (!(o.momentum >= 0.0f && o.momentum < 1.0f))
    bad("outer momentum " + std::to_string(o.momentum) + " (expected in [0, 1))");
  const size_t units = engine.layout().num_units();
  if (o.fragments < 1 || size_t(o.fragments) > units || o.fragments > o.outer_every)
    bad(std::to_string(o.fragments) + " fragments (expected 1 to the engine's " +
        std::to_string(units) + " units and at most outer_every " + std::to_string(o.outer_every) +
        ")");
  if (o.dtype != OuterDtype::f32 && o.dtype != OuterDtype::bf16 && o.dtype != OuterDtype::int8)
    bad("outer dtype " + std::to_string(int(o.dtype)));
}

// Whole units, each fragment closing once it holds its share of the shard (leaving a unit for
// each fragment after it); fragment f is due H - f H / F steps into each period.
void DiLoCo::Impl::split() {
  const FlatLayout& L = engine.layout();
  const size_t U = L.num_units(), F = size_t(o.fragments), total = L.shard_numel();
  size_t u = 0, held = 0;
  for (size_t f = 0; f < F; ++f) {
    const size_t first = u;
    do held += L.block_numel(u++);
    while (u < U - (F - 1 - f) && held * F < (f + 1) * total);
    if (f + 1 == F) u = U;
    const size_t offset = L.shard_offset(first);
    const size_t end = u < U ? L.shard_offset(u) : total;
    const int64_t H = o.outer_every;
    fragments.push_back(
        {first, u - 1, offset, end - offset, (H - int64_t(f) * H / int64_t(F)) % H});
  }
  stats.fragment_syncs.assign(F, 0);
}

// Whether every island's snapshot has the same bits (the same seed made them): a hash each,
// 8 bytes across instead of the whole model.
bool DiLoCo::Impl::same_on_every_island() {
  uint64_t h = sharding::fnv1a(reinterpret_cast<const uint8_t*>(snapshot.data()),
                               snapshot.size() * sizeof(float));
  std::vector<uint64_t> all(size_t(across.size()));
  across.all_gather(buffer(std::span<uint64_t>(&h, 1)), buffer(all)).wait();
  return std::all_of(all.begin(), all.end(), [&](uint64_t x) { return x == all[0]; });
}

void DiLoCo::Impl::launch(int f, const std::vector<float>& now) {
  const Fragment& fr = fragments[size_t(f)];
  Exchange x;
  x.fragment = f;
  x.launched.assign(now.begin() + long(fr.offset), now.begin() + long(fr.offset + fr.size));
  start(x);
  pending = std::move(x);
}

// The pseudo-gradient from the snapshot and the parameters the exchange started from, sent.
void DiLoCo::Impl::start(Exchange& x) {
  const Fragment& fr = fragments[size_t(x.fragment)];
  x.work.reset();
  x.delta.resize(fr.size);
  for (size_t i = 0; i < fr.size; ++i) x.delta[i] = snapshot[fr.offset + i] - x.launched[i];
  const int k = across.size();
  if (o.dtype == OuterDtype::f32) {
    if (k > 1) {
      x.work = across.all_reduce(buffer(x.delta), ReduceOp::avg);
      stats.bytes += all_reduce_bus_bytes(double(fr.size * sizeof(float)), k);
    }
  } else {
    const size_t packed = sharding::packed_bytes(o.dtype, fr.size);
    x.send.resize(packed);
    sharding::pack(o.dtype, x.delta, x.send);
    x.recv.resize(packed * size_t(k));
    if (k > 1) {
      x.work = across.all_gather(buffer(x.send), buffer(x.recv));
      stats.bytes += gather_bus_bytes(double(x.recv.size()), k);
    } else {
      x.recv = x.send;
    }
  }
}

void DiLoCo::Impl::apply() {
  Exchange x = std::move(*pending);
  pending.reset();
  settle(std::move(x.work), [&] {
    start(x);
    return std::move(x.work);
  });
  const int k = across.size();
  if (o.dtype != OuterDtype::f32) {  // every island's copy, in island order
    std::fill(x.delta.begin(), x.delta.end(), 0.0f);
    for (int i = 0; i < k; ++i)
      sharding::unpack_add(o.dtype, {x.recv.data() + size_t(i) * x.send.size(), x.send.size()},
                           x.delta);
    for (float& d : x.delta) d /= float(k);
  }
  const Fragment& fr = fragments[size_t(x.fragment)];
  std::vector<float> now = engine.shard_params();
  const float mu = o.momentum;
  for (size_t i = 0; i < fr.size; ++i) {
    const size_t j = fr.offset + i;
    momentum[j] = mu * momentum[j] + x.delta[i];
    snapshot[j] -= o.lr * (x.delta[i] + mu * momentum[j]);
    now[j] = snapshot[j] + (now[j] - x.launched[i]);  // + the inner step taken meanwhile, if any
  }
  engine.set_shard_params(now);
  ++stats.outer_steps;
  ++stats.fragment_syncs[size_t(x.fragment)];
}

DiLoCo::DiLoCo(ZeroEngine& engine, Communicator across, DiLoCoOptions options)
    : impl_(std::make_unique<Impl>(engine, std::move(across), options)) {
  Impl& I = *impl_;
  I.check();
  I.split();
  I.snapshot = I.engine.shard_params();
  if (I.across.size() > 1 && !I.same_on_every_island()) {
    I.across.broadcast(buffer(I.snapshot), 0).wait();
    I.stats.bytes += double(I.snapshot.size() * sizeof(float));
    I.engine.set_shard_params(I.snapshot);
  }
  I.momentum.assign(I.snapshot.size(), 0.0f);
}

DiLoCo::~DiLoCo() {
  if (impl_->pending && impl_->pending->work) try {
      impl_->pending->work->wait();
    } catch (const Error&) {  // already reported to whoever waited on the communicator
    }
}

bool DiLoCo::after_inner_step() {
  Impl& I = *impl_;
  const auto t0 = std::chrono::steady_clock::now();
  ++I.inner;
  I.watch();
  if (I.pending) I.apply();
  bool started = false;
  for (size_t f = 0; f < I.fragments.size(); ++f) {
    if (I.inner % I.o.outer_every != I.fragments[f].due) continue;
    I.launch(int(f), I.engine.shard_params());
    if (I.fragments.size() == 1) I.apply();  // not streaming: at once
    started = true;
  }
  if (I.o.island && I.o.job_store && !I.pending && I.inner % I.o.outer_every == I.join_step())
    I.admit_joiners();
  I.stats.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return started;
}

void DiLoCo::flush() {
  if (impl_->pending) impl_->apply();
}

OuterState DiLoCo::state() {
  flush();
  return OuterState{impl_->snapshot, impl_->momentum, impl_->inner};
}

void DiLoCo::set_state(OuterState s) {
  Impl& I = *impl_;
  if (s.snapshot.size() != I.snapshot.size() || s.momentum.size() != I.momentum.size() ||
      s.inner_steps < 0)
    throw Error(ErrorCode::invalid_argument, {.op = "DiLoCo::set_state"},
                "an outer state of " + std::to_string(s.snapshot.size()) + " and " +
                    std::to_string(s.momentum.size()) + " elements at inner step " +
                    std::to_string(s.inner_steps) + " for a shard of " +
                    std::to_string(I.snapshot.size()) + ": another layout wrote it");
  I.snapshot = std::move(s.snapshot);
  I.momentum = std::move(s.momentum);
  I.inner = s.inner_steps;
}

void DiLoCo::average_over_islands(std::span<double> values) {
  Impl& I = *impl_;
  const std::vector<double> mine(values.begin(), values.end());
  auto launch = [&]() -> std::optional<Work> {
    std::copy(mine.begin(), mine.end(), values.begin());
    if (I.across.size() == 1) return std::nullopt;
    return I.across.all_reduce(buffer(values), ReduceOp::avg);
  };
  I.settle(launch(), launch);
}

const std::vector<int>& DiLoCo::islands_left() const { return impl_->left; }
int DiLoCo::island_index() const { return impl_->mine; }
int64_t DiLoCo::inner_steps() const { return impl_->inner; }
DiLoCo::DiLoCo(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::pair<size_t, size_t> DiLoCo::fragment_units(int f) const {
  if (f < 0 || size_t(f) >= impl_->fragments.size()) {
    sharding::fail("DiLoCo::fragment_units", -1,
                   "fragment " + std::to_string(f) + " of " +
                       std::to_string(impl_->fragments.size()) + " (fragments are 0.." +
                       std::to_string(impl_->fragments.size() - 1) + ")");
  }
  const Impl::Fragment& fr = impl_->fragments[size_t(f)];
  return {fr.first_unit, fr.last_unit};
}
const OuterStats& DiLoCo::stats() const { return impl_->stats; }
const DiLoCoOptions& DiLoCo::options() const { return impl_->o; }

}  // namespace strata
