#include "shm/write_mode.hpp"

#include <algorithm>
#include <bit>

#include "kernels/copy_kernel.hpp"

namespace strata::shm {

namespace {
WriteMode other(WriteMode s) {
  return s == WriteMode::ordinary ? WriteMode::streaming : WriteMode::ordinary;
}
}  // namespace

WriteMode WriteModeChoice::next() {
  const uint64_t op = ops_++;
  // Operation 0 is not timed: it pays for the caller's buffers faulting in (measured: up to 10x
  // slower, which once made the wrong mode win). 1 and 2 measure each mode once.
  if (op == 1)
    running_ = WriteMode::streaming;
  else if (op < 3)
    running_ = WriteMode::ordinary;
  else
    running_ = op % kTryEvery == 0 ? other(preferred()) : preferred();
  return running_;
}

void WriteModeChoice::record(double seconds_per_byte) {
  if (ops_ <= 1) return;  // operation 0
  double& c = cost_[int(running_)];
  // Over consecutive operations in one mode, half weight to the newest sample: steady against
  // noise, yet a mode that has turned slow overtakes the other's estimate within an operation or
  // two. The first operation after the other mode replaces the estimate, which may predate a move.
  const bool fresh = c == 0 || running_ != last_recorded_;
  c = fresh ? seconds_per_byte : 0.5 * (c + seconds_per_byte);
  last_recorded_ = running_;
}

WriteMode WriteModeChoice::preferred() const {
  const double o = cost_[int(WriteMode::ordinary)], s = cost_[int(WriteMode::streaming)];
  return o != 0 && s != 0 && s < o ? WriteMode::streaming : WriteMode::ordinary;
}

WriteModeChoice* SizedWriteModeChoice::at(size_t bytes, bool oversubscribed) {
  if (bytes < (oversubscribed ? kLearnFromBytesOversubscribed : kLearnFromBytes)) return nullptr;
  const int above = std::bit_width(bytes / kLearnFromBytes) - 1;  // log2(bytes / 64 KiB)
  return &by_size_[std::min(above / 2, kSizeClasses - 1)];
}

StagingCopy::StagingCopy(SizedWriteModeChoice& choices, size_t bytes, bool oversubscribed,
                         ShmWriteMode policy)
    : bytes_(bytes) {
  if (policy != ShmWriteMode::learn) {  // forced: nothing to learn or time
    mode_ = policy == ShmWriteMode::streaming ? WriteMode::streaming : WriteMode::ordinary;
    return;
  }
  choice_ = choices.at(bytes, oversubscribed);
  if (!choice_) return;
  mode_ = choice_->next();
  start_ = std::chrono::steady_clock::now();
}

void StagingCopy::operator()(void* dst, const void* src, size_t n) const {
  if (mode_ == WriteMode::streaming)
    kernels::copy_streaming(dst, src, n);
  else
    kernels::copy(dst, src, n);
}

void StagingCopy::done() {
  if (!choice_) return;
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start_;
  choice_->record(took.count() / double(bytes_));
}

}  // namespace strata::shm
