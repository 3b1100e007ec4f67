#include "parallel/pipeline_parallel.hpp"

#include <chrono>

namespace gpt {

namespace {
// One tag per (direction, receiving chunk); 16 bits are plenty (chunks <= 64).
uint32_t tag_of(int kind, int chunk) { return uint32_t(1 + kind * 64 + chunk); }
}  // namespace

Pipeline::Pipeline(strata::Communicator pp, pp::Schedule schedule, int micro_batches, int chunks)
    : group_(std::move(pp)), schedule_(schedule), p_(group_.size()), m_(micro_batches), v_(chunks) {
  actions_ = pp::schedule(schedule, p_, group_.rank(), m_, v_);
  for (int c = 0; c < v_; ++c) slots_.push_back(pp::chunk_slots(schedule, p_, rank(), m_, v_, c));
}

void Pipeline::send(Kind k, int to_vs, std::span<const float> from) {
  std::vector<float> data;
  if (!spare_.empty()) data = std::move(spare_.back()), spare_.pop_back();
  data.assign(from.begin(), from.end());
  const int to = to_vs % p_, chunk = to_vs / p_;
  strata::Work w = group_.send(strata::buffer(data), to, tag_of(k, chunk));
  sends_.push_back({std::move(w), std::move(data)});
  stats_.bytes_sent += double(from.size_bytes());
}

void Pipeline::recv(Kind k, int from_vs, int my_chunk, std::span<float> into) {
  const auto t0 = std::chrono::steady_clock::now();
  group_.recv(strata::buffer(into), from_vs % p_, tag_of(k, my_chunk)).wait();
  stats_.recv_wait_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void Pipeline::recv_activation(int chunk, std::span<float> into) {
  recv(forward, virtual_stage(chunk) - 1, chunk, into);
}
void Pipeline::send_activation(int chunk, std::span<const float> from) {
  send(forward, virtual_stage(chunk) + 1, from);
}
void Pipeline::recv_gradient(int chunk, std::span<float> into) {
  recv(backward, virtual_stage(chunk) + 1, chunk, into);
}
void Pipeline::send_gradient(int chunk, std::span<const float> from) {
  send(backward, virtual_stage(chunk) - 1, from);
}

void Pipeline::finish_sends() {
  for (InFlight& s : sends_) {
    s.work.wait();
    spare_.push_back(std::move(s.data));
  }
  sends_.clear();
}

Pipeline::Stats Pipeline::take_stats() {
  Stats s = stats_;
  stats_ = Stats{};
  return s;
}

}  // namespace gpt
