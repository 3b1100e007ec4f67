// Where a ZeroEngine keeps the per-element state it owns, in its owned space (the padded flat
// model at stage 0, the shard at stages 1-3): the AdamW moments m and v (none under SGD), and,
// when stage 3 offloads them too, the parameters p. In memory (the moments only), or offloaded to
// a file and streamed through a window of three chunks: the one being updated, the next one being
// read and the last one being written.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "strata/sharding.hpp"

namespace strata::sharding {

class StateStore {
 public:
  enum Array { m = 0, v = 1, p = 2 };
  /// The arrays from an offset on: `n` elements valid until the next map() or finish(); p is
  /// null unless the store holds the parameters.
  struct Slice {
    float *m, *v, *p;
    size_t n;
  };

  static std::unique_ptr<StateStore> in_memory(size_t n);
  /// No state at all (UpdateRule::sgd in memory): the moments read as zeros, writes to them are
  /// dropped (SGD never reads them), and nothing is allocated.
  static std::unique_ptr<StateStore> stateless(size_t n);
  /// The moments (unless `moments` is false: SGD) and with `params` the parameters, in a file
  /// in o.optimizer_dir. Fails, naming the directory, when it is missing, unwritable or short of
  /// space, or the window too small.
  static std::unique_ptr<StateStore> on_disk(size_t n, bool moments, bool params,
                                             const OffloadOptions& o, int rank);
  virtual ~StateStore() = default;

  /// The optimizer's sweep: map() at increasing offsets, then finish() (writes back, without
  /// waiting). prefetch() starts reading the sweep's first chunks early.
  virtual Slice map(size_t offset) = 0;
  virtual void finish() {}
  virtual void prefetch() {}

  /// Random access (set_state, checkpoints, stage-3 gathers): n elements of one array.
  virtual void read(Array which, size_t offset, size_t n, float* dst) = 0;
  virtual void write(Array which, size_t offset, size_t n, const float* src) = 0;

  size_t size() const { return n_; }
  virtual bool holds_params() const { return false; }
  virtual size_t resident_bytes() const = 0;
  /// Bytes of `which` kept in the file (0 in memory).
  virtual size_t offloaded_bytes(Array which) const {
    (void)which;
    return 0;
  }

 protected:
  explicit StateStore(size_t n) : n_(n) {}
  size_t n_;
};

}  // namespace strata::sharding
