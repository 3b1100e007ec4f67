#include "shm/write_mode.hpp"

#include <algorithm>
#include <bit>

#include "kernels/copy_kernel.hpp"

namespace strata::shm {

WriteMode WriteModeChoice::next(bool single_copy) {
  const uint64_t op = ops_++;
  // Operation 0 is not timed: it pays for the caller's buffers faulting in (measured: up to 10x
  // slower, which once made the wrong mode win). 1 and 2 measure each staging mode once.
  if (op == 1) {
    running_ = WriteMode::streaming;
  } else if (op < 3) {
    running_ = WriteMode::ordinary;
  } else if (single_copy && cost(WriteMode::single_copy) == 0) {
    running_ = WriteMode::single_copy;
  } else if (op % kTryEvery == 0) {
    // A retry: the modes offered but not preferred, in turn.
    WriteMode others[2];
    int k = 0;
    const WriteMode best = preferred(single_copy);
    for (WriteMode m : {WriteMode::ordinary, WriteMode::streaming, WriteMode::single_copy}) {
      if (m != best && (m != WriteMode::single_copy || single_copy)) others[k++] = m;
    }
    running_ = others[(op / kTryEvery) % uint64_t(k)];
  } else {
    running_ = preferred(single_copy);
  }
  return running_;
}

void WriteModeChoice::record(double seconds_per_byte) {
  if (ops_ <= 1) return;  // operation 0
  double& c = cost(running_);
  // Over consecutive operations in one mode, half weight to the newest sample: steady against
  // noise, yet a mode that has turned slow overtakes the other's estimate within an operation or
  // two. The first operation after another mode replaces the estimate, which may predate a move.
  const bool fresh = c == 0 || running_ != last_recorded_;
  c = fresh ? seconds_per_byte : 0.5 * (c + seconds_per_byte);
  last_recorded_ = running_;
}

WriteMode WriteModeChoice::preferred(bool single_copy) const {
  WriteMode best = WriteMode::ordinary;
  if (cost(best) == 0) return best;
  for (WriteMode m : {WriteMode::streaming, WriteMode::single_copy}) {
    if (m == WriteMode::single_copy && !single_copy) continue;
    if (cost(m) != 0 && cost(m) < cost(best)) best = m;
  }
  return best;
}

WriteModeChoice* SizedWriteModeChoice::at(size_t bytes, bool oversubscribed) {
  if (bytes < (oversubscribed ? kLearnFromBytesOversubscribed : kLearnFromBytes)) return nullptr;
  const int above = std::bit_width(bytes / kLearnFromBytes) - 1;  // log2(bytes / 64 KiB)
  return &by_size_[std::min(above / 2, kSizeClasses - 1)];
}

StagingCopy::StagingCopy(SizedWriteModeChoice* choices, size_t bytes, bool oversubscribed,
                         bool single_copy, ShmWriteMode policy)
    : bytes_(bytes) {
  switch (policy) {  // forced: nothing to learn or time
    case ShmWriteMode::ordinary:
      return;
    case ShmWriteMode::streaming:
      mode_ = WriteMode::streaming;
      return;
    case ShmWriteMode::single_copy:
      if (single_copy) mode_ = WriteMode::single_copy;
      return;
    case ShmWriteMode::learn:
      break;
  }
  choice_ = choices ? choices->at(bytes, oversubscribed) : nullptr;
  if (!choice_) return;
  mode_ = choice_->next(single_copy);
  start_ = std::chrono::steady_clock::now();
}

void StagingCopy::operator()(void* dst, const void* src, size_t n) const {
  if (mode_ == WriteMode::streaming)
    kernels::copy_streaming(dst, src, n);
  else if (mode_ == WriteMode::ordinary)
    kernels::copy(dst, src, n);
}

void StagingCopy::done() {
  if (!choice_) return;
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start_;
  choice_->record(took.count() / double(bytes_));
}

}  // namespace strata::shm
