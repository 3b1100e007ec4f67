#include "parallel/expert_parallel.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <utility>

#include "strata/types.hpp"

namespace gpt {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}
}  // namespace

ExpertParallel::ExpertParallel(strata::Communicator ep)
    : ep_(std::move(ep)),
      sc_(size_t(ep_.size())),
      sd_(sc_.size()),
      rc_(sc_.size()),
      rd_(sc_.size()) {}

void ExpertParallel::counts(const std::vector<int32_t>& mine, std::vector<int32_t>& theirs) {
  const auto t0 = Clock::now();
  theirs.resize(mine.size());
  ep_.all_to_all(
         strata::Buffer{const_cast<int32_t*>(mine.data()), mine.size(), strata::DataType::i32},
         strata::buffer(theirs))
      .wait();
  bytes_ += double(mine.size() - mine.size() / size_t(size())) * sizeof(int32_t);
  seconds_ += since(t0);
}

void ExpertParallel::rows(const float* send, const std::vector<size_t>& send_rows, float* recv,
                          const std::vector<size_t>& recv_rows, int width) {
  const auto t0 = Clock::now();
  size_t sent = 0, got = 0;
  for (size_t j = 0; j < sc_.size(); ++j) {
    sc_[j] = send_rows[j] * size_t(width), sd_[j] = sent, sent += sc_[j];
    rc_[j] = recv_rows[j] * size_t(width), rd_[j] = got, got += rc_[j];
  }
  ep_.all_to_allv(strata::Buffer{const_cast<float*>(send), sent, strata::DataType::f32}, sc_, sd_,
                  strata::Buffer{recv, got, strata::DataType::f32}, rc_, rd_)
      .wait();
  bytes_ += double(sent - sc_[size_t(rank())]) * sizeof(float);
  seconds_ += since(t0);
}

void ExpertParallel::start_average(const std::vector<std::span<float>>& grads) {
  if (work_) throw std::logic_error("ExpertParallel::start_average: one is still in flight");
  size_t n = 0;
  for (const auto& g : grads) n += g.size();
  packed_.resize(n);
  n = 0;
  for (const auto& g : grads)
    n = size_t(std::copy(g.begin(), g.end(), packed_.begin() + long(n)) - packed_.begin());
  averaged_ = grads;
  work_ = ep_.all_reduce(strata::buffer(packed_), strata::ReduceOp::avg);
  average_bytes_ += strata::all_reduce_bus_bytes(4.0 * double(n), size());
}

void ExpertParallel::finish_average() {
  if (!work_) return;
  const auto t0 = Clock::now();
  work_->wait();
  average_wait_ += since(t0);
  work_.reset();
  size_t at = 0;
  for (const auto& g : averaged_) {
    std::copy_n(packed_.begin() + long(at), g.size(), g.begin());
    at += g.size();
  }
}

double ExpertParallel::take_average_bus_bytes() { return std::exchange(average_bytes_, 0.0); }
double ExpertParallel::take_average_wait_seconds() { return std::exchange(average_wait_, 0.0); }

double ExpertParallel::take_bytes() { return std::exchange(bytes_, 0.0); }
double ExpertParallel::take_seconds() { return std::exchange(seconds_, 0.0); }

}  // namespace gpt
