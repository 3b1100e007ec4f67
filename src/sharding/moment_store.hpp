// Where a ZeroEngine keeps the AdamW moments it owns: n elements each of m and v in the engine's
// owned space (the padded flat model at stage 0, the shard at stages 1-3). In memory, or offloaded
// to a file and streamed through a window of three chunks: the one being updated, the next one
// being read and the last one being written.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "strata/sharding.hpp"

namespace strata::sharding {

class MomentStore {
 public:
  enum Moment { m = 0, v = 1 };
  /// m and v from an offset on: `n` elements valid until the next map() or finish().
  struct Slice {
    float *m, *v;
    size_t n;
  };

  static std::unique_ptr<MomentStore> in_memory(size_t n);
  /// Fails, naming the directory, when it is missing, unwritable or short of space.
  static std::unique_ptr<MomentStore> on_disk(size_t n, const OffloadOptions& o, int rank);
  virtual ~MomentStore() = default;

  /// The optimizer's sweep: map() at increasing offsets, then finish() (writes back, without
  /// waiting). prefetch() starts reading the sweep's first chunks early.
  virtual Slice map(size_t offset) = 0;
  virtual void finish() {}
  virtual void prefetch() {}

  /// Random access (set_state, checkpoints): n elements of one moment from `offset`.
  virtual void read(Moment which, size_t offset, size_t n, float* dst) = 0;
  virtual void write(Moment which, size_t offset, size_t n, const float* src) = 0;

  size_t size() const { return n_; }
  virtual size_t resident_bytes() const = 0;
  virtual size_t offloaded_bytes() const { return 0; }

 protected:
  explicit MomentStore(size_t n) : n_(n) {}
  size_t n_;
};

}  // namespace strata::sharding
