// Sharded checkpoints on disk: each rank's shard file, the manifest, the LATEST pointer, and a
// reader that serves any unit range from a checkpoint of any world size (docs/sharding.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "strata/sharding.hpp"

namespace strata::sharding {

/// What one rank saves: its shard space (of the saving world) of parameters and both moments.
struct ShardState {
  int64_t step = 0;
  std::vector<float> params, m, v;
};

/// Collective over `comm`: writes every rank's shard and the manifest into a fresh directory
/// under `dir`, then points `dir`/LATEST at it. Every file goes to a temporary name, is fsynced
/// and renamed, so LATEST only ever names a complete checkpoint.
void save_checkpoint(Communicator& comm, const FlatLayout& layout, int stage,
                     const ShardState& mine, const std::string& dir);

/// The checkpoint LATEST names under `dir`, checked against `layout`'s tensors.
class CheckpointReader {
 public:
  enum Array { params = 0, moment1 = 1, moment2 = 2 };
  CheckpointReader(const std::string& dir, const FlatLayout& layout, int rank);
  int64_t step() const { return step_; }
  int saved_world_size() const { return saved_->world_size(); }
  /// Copies unit-local elements [begin, begin + count) of unit u of `a` into dst; elements past
  /// the unit's real size (padding) are zero. Reads and verifies shard files as needed.
  void read(Array a, size_t unit, size_t begin, size_t count, float* dst);

 private:
  const std::vector<float>& shard(int q);
  [[noreturn]] void fail(const std::string& what) const;

  std::string dir_, path_;
  int rank_;
  int64_t step_ = 0;
  std::unique_ptr<FlatLayout> saved_;
  struct ShardEntry {
    std::string file;
    uint64_t bytes = 0, checksum = 0;
  };
  std::vector<ShardEntry> entries_;
  std::map<int, std::vector<float>> loaded_;  // verified shard files: params, m, v back to back
};

/// FNV-1a 64 of n bytes: the checkpoint files' checksum, DiLoCo's start comparison.
uint64_t fnv1a(const uint8_t* p, size_t n);

namespace testing {
/// Test hook called during save at named points ("shard_written", "manifest_written").
using SaveHook = void (*)(const char* point, int rank);
void set_save_hook(SaveHook hook);
}  // namespace testing

}  // namespace strata::sharding
