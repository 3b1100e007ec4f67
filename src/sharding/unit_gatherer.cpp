#include "sharding/unit_gatherer.hpp"

#include <chrono>
#include <utility>

#include "sharding/fail.hpp"

namespace strata::sharding {

UnitGatherer::UnitGatherer(Communicator comm, const FlatLayout& layout, BlockReader own_block,
                           int depth, size_t resident_below_bytes)
    : comm_(std::move(comm)), layout_(layout), own_block_(std::move(own_block)), depth_(depth) {
  if (depth < 0) fail("ZeroEngine", comm_.rank(), "prefetch depth must be >= 0");
  const size_t units = layout_.num_units();
  resident_.resize(units);
  for (size_t u = 0; u < units; ++u)
    resident_[u] = layout_.unit_numel(u) * sizeof(float) < resident_below_bytes;
  state_.assign(units, State::absent);
  full_.resize(units);
  work_.resize(units);
}

UnitGatherer::~UnitGatherer() {
  for (size_t u = 0; u < state_.size(); ++u) try {
      if (state_[u] == State::in_flight) work_[u].wait();
    } catch (const Error&) {  // already reported to whoever waited on the communicator
    }
}

void UnitGatherer::issue(size_t u, GatherEvent::Kind kind) {
  if (full_[u].empty()) {
    full_[u].resize(layout_.unit_numel(u));
    if (!resident_[u]) {
      live_ += full_[u].size() * sizeof(float);
      peak_live_ = std::max(peak_live_, live_);
    }
  }
  // In place: this rank's block goes where the gather would put it.
  const size_t blk = layout_.block_numel(u);
  float* mine = full_[u].data() + size_t(comm_.rank()) * blk;
  own_block_(u, mine);
  work_[u] = comm_.all_gather(Buffer{mine, blk, DataType::f32},
                              Buffer{full_[u].data(), full_[u].size(), DataType::f32});
  ++stats_.collectives;
  stats_.bus_bytes += gather_bus_bytes(full_[u].size() * sizeof(float), comm_.size());
  state_[u] = State::in_flight;
  note(kind, u);
}

void UnitGatherer::wait(size_t u) {
  if (state_[u] != State::in_flight) return;
  const auto t0 = std::chrono::steady_clock::now();
  work_[u].wait();
  stats_.exposed_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_.comm_seconds += work_[u].elapsed_seconds();
  work_[u] = Work();
  state_[u] = State::ready;
}

void UnitGatherer::end_pass() {
  if (!reads_.empty()) {
    const std::pair<bool, size_t> kind{forward_, reads_.front()};
    orders_[kind] = std::move(reads_);
  }
  reads_.clear();
  follow_ = nullptr;
}

size_t UnitGatherer::ahead(size_t u, int k) const {
  if (follow_) {
    const size_t at = reads_.size() - 1 + size_t(k);
    return at < follow_->size() ? (*follow_)[at] : kNone;
  }
  const long v = forward_ ? long(u) + k : long(u) - k;
  return v < 0 || v >= long(state_.size()) ? kNone : size_t(v);
}

void UnitGatherer::set_forward(bool forward) {
  end_pass();
  // A new forward pass does not start with the kept units: free them so the window holds.
  while (forward && !kept_.empty()) drop(kept_.back());
  forward_ = forward;
}

void UnitGatherer::gather(size_t u) {
  if (u >= state_.size()) fail("ZeroEngine.gather", comm_.rank(), "no unit " + std::to_string(u));
  if (reads_.empty()) {  // the pass's first read: is its order known?
    const auto known = orders_.find({forward_, u});
    follow_ = known == orders_.end() ? nullptr : &known->second;
  }
  reads_.push_back(u);
  const size_t at = reads_.size() - 1;
  if (follow_ && (at >= follow_->size() || (*follow_)[at] != u)) follow_ = nullptr;  // departed
  std::erase(kept_, u);  // in use again: the next release frees it
  if (state_[u] == State::absent) issue(u, GatherEvent::issue);
  // The window: the next `depth` units of this pass are gathered while unit u computes.
  for (int k = 1; k <= depth_; ++k) {
    const size_t v = ahead(u, k);
    if (v == kNone) break;
    if (state_[v] == State::absent) issue(v, GatherEvent::prefetch);
  }
  wait(u);
}

void UnitGatherer::release(size_t u) {
  if (u >= state_.size()) fail("ZeroEngine.release", comm_.rank(), "no unit " + std::to_string(u));
  if (resident_[u] || state_[u] == State::absent) return;
  // Backward starts with the unit forward ended with: keep it rather than gather it again. So
  // too a unit a recorded backward pass starts with, at its last read in this (recorded)
  // forward: a tied embedding, read last by the head, first by the head's backward.
  auto last_read = [&] {
    return follow_ && std::find(follow_->begin() + ptrdiff_t(reads_.size()), follow_->end(), u) ==
                          follow_->end();
  };
  if (forward_ && (u + 1 == state_.size() || (orders_.count({false, u}) && last_read()))) {
    if (!kept(u)) kept_.push_back(u);
    return;
  }
  drop(u);
}

void UnitGatherer::drop(size_t u) {
  std::erase(kept_, u);
  wait(u);  // the collective may still be writing into the buffer
  live_ -= full_[u].size() * sizeof(float);
  std::vector<float>().swap(full_[u]);
  state_[u] = State::absent;
  note(GatherEvent::free, u);
}

std::span<const float> UnitGatherer::unit(size_t u, const char* what) const {
  if (state_[u] != State::ready || kept(u))
    fail("ZeroEngine", comm_.rank(),
         std::string(what) + " of unit " + std::to_string(u) + " while it is not gathered");
  return full_[u];
}

void UnitGatherer::invalidate() {
  end_pass();
  for (size_t u = 0; u < state_.size(); ++u) {
    if (state_[u] == State::absent) continue;
    wait(u);
    // Resident units keep their memory; the next gather refreshes it.
    if (resident_[u])
      state_[u] = State::absent;
    else
      drop(u);
  }
}

size_t UnitGatherer::resident_bytes() const {
  size_t b = 0;
  for (size_t u = 0; u < resident_.size(); ++u)
    if (resident_[u]) b += layout_.unit_numel(u) * sizeof(float);
  return b;
}

StepStats UnitGatherer::take_stats() { return std::exchange(stats_, StepStats{}); }

}  // namespace strata::sharding
