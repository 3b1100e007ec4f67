#include "shm/write_mode.hpp"

#include <algorithm>
#include <bit>

#include "kernels/copy_kernel.hpp"

namespace strata::shm {

namespace {
// The leader's published preference where it has one and offers it here, else `own`.
WriteMode led_or(GroupChoice g, bool single_copy, WriteMode own) {
  if (g.leads || !g.led) return own;
  const uint8_t v = g.led->load(std::memory_order_relaxed);
  if (v == 0 || (WriteMode(v - 1) == WriteMode::single_copy && !single_copy)) return own;
  return WriteMode(v - 1);
}
}  // namespace

WriteMode WriteModeChoice::next(bool single_copy, GroupChoice group) {
  const uint64_t op = ops_++;
  offered_ = single_copy;
  const WriteMode before = running_;
  if (op < 2) {  // 0 and 1, then 2 and 3: each staging mode twice
    running_ = WriteMode::streaming;
  } else if (op < 4) {
    running_ = WriteMode::ordinary;
  } else if (single_copy && cost(WriteMode::single_copy) == 0) {
    running_ = WriteMode::single_copy;
  } else if (op % kTryEvery < 2) {
    // A retry, two operations long: the modes offered but not preferred, in turn.
    WriteMode others[2];
    int k = 0;
    const WriteMode best = led_or(group, single_copy, preferred(single_copy));
    for (WriteMode m : {WriteMode::ordinary, WriteMode::streaming, WriteMode::single_copy}) {
      if (m != best && (m != WriteMode::single_copy || single_copy)) others[k++] = m;
    }
    running_ = others[(op / kTryEvery) % uint64_t(k)];
  } else {
    running_ = led_or(group, single_copy, preferred(single_copy));
  }
  // Only an operation in the same mode as the one before is timed. The first after a switch
  // pays for it: ranks that ran ahead of each other in a staged mode meet again where an
  // unstaged input waits for its readers (n = 4 on 2 cores, 4 MiB all-to-all: single copy
  // timed 2400-2700 us just after streaming, 1200-1400 us in a row). Operation 0 pays for the
  // caller's buffers faulting in (up to 10x slower, which once made the wrong mode win).
  timed_ = op > 0 && running_ == before;
  return running_;
}

void WriteModeChoice::record(double seconds_per_byte, GroupChoice group) {
  if (!timed_) return;
  Samples& s = samples_[int(running_)];
  s.recent[s.next] = seconds_per_byte;
  s.next = (s.next + 1) % kWindow;
  if (group.leads && group.led)
    group.led->store(uint8_t(1 + int(preferred(offered_))), std::memory_order_relaxed);
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

int SizedWriteModeChoice::size_class(size_t bytes) {
  const int above = std::bit_width(bytes / kLearnFromBytes) - 1;  // log2(bytes / 64 KiB)
  return std::clamp(above / 2, 0, kSizeClasses - 1);
}

WriteModeChoice* SizedWriteModeChoice::at(size_t bytes, bool oversubscribed) {
  if (bytes < (oversubscribed ? kLearnFromBytesOversubscribed : kLearnFromBytes)) return nullptr;
  return &by_size_[size_class(bytes)];
}

StagingCopy::StagingCopy(SizedWriteModeChoice* choices, size_t bytes, Segment* group,
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
  choice_ = choices ? choices->at(bytes, group && group->oversubscribed()) : nullptr;
  if (!choice_) return;
  if (group) group_ = {&group->header(0).led_modes[choices->led_index(bytes)], group->rank() == 0};
  mode_ = choice_->next(single_copy, group_);
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
  choice_->record(took.count() / double(bytes_), group_);
}

}  // namespace strata::shm
