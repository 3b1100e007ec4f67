#include "sharding/state_store.hpp"

#include <algorithm>
#include <array>
#include <vector>

#include "sharding/async_file.hpp"
#include "sharding/fail.hpp"

namespace strata::sharding {
namespace {

class MemoryMoments final : public StateStore {
 public:
  explicit MemoryMoments(size_t n)
      : StateStore(n), mv_{std::vector<float>(n), std::vector<float>(n)} {}
  Slice map(size_t off) override {
    return {mv_[0].data() + off, mv_[1].data() + off, nullptr, n_ - off};
  }
  void read(Array w, size_t off, size_t n, float* dst) override {
    std::copy_n(mv_.at(w).data() + off, n, dst);
  }
  void write(Array w, size_t off, size_t n, const float* src) override {
    std::copy_n(src, n, mv_.at(w).data() + off);
  }
  size_t resident_bytes() const override { return 2 * n_ * sizeof(float); }

 private:
  std::array<std::vector<float>, 2> mv_;
};

// UpdateRule::sgd in memory: nothing kept.
class NoState final : public StateStore {
 public:
  explicit NoState(size_t n) : StateStore(n) {}
  Slice map(size_t off) override { return {nullptr, nullptr, nullptr, n_ - off}; }
  void read(Array, size_t, size_t n, float* dst) override { std::fill_n(dst, n, 0.0f); }
  void write(Array, size_t, size_t, const float*) override {}
  size_t resident_bytes() const override { return 0; }
};

// The file holds chunk after chunk, each C elements of m, then of v (when it holds the moments),
// then of p (when it holds the parameters); the last chunk is padded. Slot k % 3 holds chunk k;
// the file's one I/O thread runs jobs in order, so a chunk read into a slot whose previous chunk
// is still being written waits for that write by construction, and the sweep waits for a slot's
// last job before it touches the slot. Under SGD it holds no moments: they read as zeros.
class DiskState final : public StateStore {
 public:
  static constexpr size_t kSlots = 3;

  DiskState(size_t n, bool moments, bool params, size_t chunk, const std::string& dir, int rank)
      : StateStore(n),
        moments_(moments),
        params_(params),
        A_((moments ? 2 : 0) + (params ? 1 : 0)),
        C_(chunk),
        chunks_((n + chunk - 1) / chunk),
        file_(dir, chunks_ * A_ * chunk * sizeof(float), "ZeroEngine.offload", rank) {
    for (size_t i = 0; i < std::min(kSlots, chunks_); ++i) slots_[i].data.assign(A_ * C_, 0.0f);
  }
  ~DiskState() override {
    try {
      file_.drain();
    } catch (const Error&) {  // the engine is going away; the next wait would have reported it
    }
  }

  void prefetch() override {
    for (size_t k = 0; k < std::min<size_t>(2, chunks_); ++k) load(k);
  }
  Slice map(size_t off) override {
    const size_t k = off / C_;
    if (k != current_) {
      if (current_ != kNone) store(current_);
      file_.wait(load(k).ticket);  // its read, or the write of the same chunk last sweep
      current_ = k;
      if (k + 1 < chunks_) load(k + 1);
    }
    const size_t i = off - k * C_;
    float* at = slots_[k % kSlots].data.data() + i;
    return {moments_ ? at + position(m) * C_ : nullptr, moments_ ? at + position(v) * C_ : nullptr,
            params_ ? at + position(p) * C_ : nullptr, std::min(C_ - i, n_ - off)};
  }
  void finish() override {
    if (current_ != kNone) store(current_);
    current_ = kNone;
  }

  void read(Array w, size_t off, size_t n, float* dst) override {
    if (!holds(w)) {
      std::fill_n(dst, n, 0.0f);
      return;
    }
    settle();
    for_pieces(w, off, n, [&](size_t at, size_t i, size_t len) {
      file_.wait(file_.read(at, dst + i, len * sizeof(float)));
    });
  }
  void write(Array w, size_t off, size_t n, const float* src) override {
    if (!holds(w)) return;  // SGD's moments: never read
    settle();
    for_pieces(w, off, n, [&](size_t at, size_t i, size_t len) {
      file_.write(at, src + i, len * sizeof(float));
    });
    file_.drain();
  }

  bool holds_params() const override { return params_; }
  size_t resident_bytes() const override {
    return std::min(kSlots, chunks_) * A_ * C_ * sizeof(float);
  }
  size_t offloaded_bytes(Array w) const override { return holds(w) ? n_ * sizeof(float) : 0; }

 private:
  static constexpr size_t kNone = size_t(-1);
  struct Slot {
    std::vector<float> data;
    size_t chunk = kNone;
    AsyncFile::Ticket ticket = 0;
  };

  bool holds(Array w) const { return w == p ? params_ : moments_; }
  // Where w's C elements lie in a chunk: m, v, then p (first when there are no moments).
  size_t position(Array w) const { return w == p ? (moments_ ? 2 : 0) : size_t(w); }
  size_t chunk_bytes() const { return A_ * C_ * sizeof(float); }
  Slot& load(size_t k) {
    Slot& s = slots_[k % kSlots];
    if (s.chunk != k) {
      s.chunk = k;
      s.ticket = file_.read(k * chunk_bytes(), s.data.data(), chunk_bytes());
    }
    return s;
  }
  void store(size_t k) {
    Slot& s = slots_[k % kSlots];
    s.ticket = file_.write(k * chunk_bytes(), s.data.data(), chunk_bytes());
  }
  // Random access goes to the file: every queued write lands first and no slot keeps a copy.
  void settle() {
    finish();
    file_.drain();
    for (auto& s : slots_) s.chunk = kNone;
  }
  // Calls f(file byte offset, index into the caller's array, elements) chunk by chunk.
  template <typename F>
  void for_pieces(Array w, size_t off, size_t n, F f) {
    if (off + n > n_ || !holds(w))
      fail("ZeroEngine.offload", -1,
           "array " + std::to_string(int(w)) + " [" + std::to_string(off) + ", " +
               std::to_string(off + n) + ") is not in the file",
           ErrorCode::internal);
    for (size_t i = 0; i < n;) {
      const size_t k = (off + i) / C_, within = off + i - k * C_;
      const size_t len = std::min(C_ - within, n - i);
      f(k * chunk_bytes() + (position(w) * C_ + within) * sizeof(float), i, len);
      i += len;
    }
  }

  bool moments_, params_;
  size_t A_, C_, chunks_;
  AsyncFile file_;
  std::array<Slot, kSlots> slots_;
  size_t current_ = kNone;
};

}  // namespace

std::unique_ptr<StateStore> StateStore::in_memory(size_t n) {
  return std::make_unique<MemoryMoments>(n);
}

std::unique_ptr<StateStore> StateStore::stateless(size_t n) { return std::make_unique<NoState>(n); }

std::unique_ptr<StateStore> StateStore::on_disk(size_t n, bool moments, bool params,
                                                const OffloadOptions& o, int rank) {
  constexpr size_t kMinChunk = 8;  // tiny, but any chunk is correct; only its speed suffers
  const size_t arrays = (moments ? 2 : 0) + (params ? 1 : 0);
  if (arrays == 0)
    fail("ZeroEngine", rank, "an offload file that would hold nothing", ErrorCode::internal);
  const size_t per_element = DiskState::kSlots * arrays * sizeof(float);
  const size_t chunk = o.window_bytes / per_element;
  if (chunk < kMinChunk)
    fail("ZeroEngine", rank,
         "offload window of " + std::to_string(o.window_bytes) + " bytes: at least " +
             std::to_string(kMinChunk * per_element) + " (three chunks of " +
             (!params   ? "m and v)"
              : moments ? "m, v and the parameters)"
                        : "the parameters)"));
  return std::make_unique<DiskState>(n, moments, params, std::min(chunk, std::max<size_t>(n, 1)),
                                     o.optimizer_dir, rank);
}

}  // namespace strata::sharding
