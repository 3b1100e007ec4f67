// DiLoCo's outer optimizer and the split of a job into islands (strata/diloco.hpp).
#include "strata/diloco.hpp"

#include <chrono>
#include <cmath>

#include "sharding/fail.hpp"

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
  return is;
}

DiLoCo::DiLoCo(ZeroEngine& engine, Communicator across, DiLoCoOptions options)
    : engine_(engine), across_(std::move(across)), options_(options) {
  const auto bad = [&](const std::string& what) {
    sharding::fail("DiLoCo", across_.rank(), what + " (group " + across_.name() + ")");
  };
  if (options_.outer_every < 1)
    bad("outer_every " + std::to_string(options_.outer_every) + " (expected 1 or more)");
  if (!(options_.lr > 0.0f) || !std::isfinite(options_.lr))
    bad("outer lr " + std::to_string(options_.lr) + " (expected above 0)");
  if (!(options_.momentum >= 0.0f && options_.momentum < 1.0f))
    bad("outer momentum " + std::to_string(options_.momentum) + " (expected in [0, 1))");
  snapshot_ = engine_.shard_params();
  if (across_.size() > 1) {
    across_.broadcast(buffer(snapshot_), 0).wait();
    engine_.set_shard_params(snapshot_);
  }
  momentum_.assign(snapshot_.size(), 0.0f);
}

bool DiLoCo::after_inner_step() {
  if (++inner_ < options_.outer_every) return false;
  outer_step();
  return true;
}

void DiLoCo::outer_step() {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<float> delta = engine_.shard_params();
  for (size_t i = 0; i < delta.size(); ++i) delta[i] = snapshot_[i] - delta[i];
  const int k = across_.size();
  if (k > 1) {
    across_.all_reduce(buffer(delta), ReduceOp::avg).wait();
    stats_.bytes += all_reduce_bus_bytes(double(delta.size() * sizeof(float)), k);
  }
  const float mu = options_.momentum, lr = options_.lr;
  for (size_t i = 0; i < delta.size(); ++i) {
    momentum_[i] = mu * momentum_[i] + delta[i];
    snapshot_[i] -= lr * (delta[i] + mu * momentum_[i]);
  }
  engine_.set_shard_params(snapshot_);
  inner_ = 0;
  ++stats_.outer_steps;
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace strata
