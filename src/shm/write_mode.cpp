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
  Samples& s = samples_[int(running_)];
  s.recent[s.next] = seconds_per_byte;
  s.next = (s.next + 1) % kWindow;
}

double WriteModeChoice::cost(WriteMode m) const {
  // The fastest of the recent samples: a preemption or an interrupt only ever adds time, so
  // one slow operation says nothing, while a mode that has turned slow is slow every time.
  double best = 0;
  for (double t : samples_[int(m)].recent)
    if (t > 0 && (best == 0 || t < best)) best = t;
  return best;
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
