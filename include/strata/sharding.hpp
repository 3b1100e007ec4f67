// Sharding: flat parameter/gradient buffers with a shard map, gradient buckets that overlap
// communication with backward, and a ZeRO engine (stages 0-3) with a sharded AdamW and sharded,
// reshardable checkpoints. Host memory, float32. Design and formulas: docs/sharding.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "strata/communicator.hpp"

namespace strata {

/// One tensor of a model. Tensors belong to units (a layer, usually): stage 3 gathers whole
/// units, buckets hold whole units, and the tensors of one unit must be listed next to each other.
struct TensorSpec {
  std::string name;
  std::vector<size_t> shape;
  int unit = 0;
  /// Whether the global gradient norm (clipping) counts this tensor. False for a copy whose
  /// gradient another rank already counts: a tensor-parallel replica, a tied copy.
  bool in_grad_norm = true;
  size_t numel() const;
};

/// The shard map: tensors laid out back to back in one flat buffer, unit by unit in unit order,
/// each unit zero-padded to a multiple of the world size. Rank r owns block r of every unit
/// (unit_numel(u) / world_size elements). A rank's "shard space" is its blocks of all units
/// concatenated in unit order: shard_numel() elements, block of unit u at shard_offset(u).
class FlatLayout {
 public:
  /// Units must be numbered 0..U-1 in order of appearance. Throws strata::Error otherwise.
  FlatLayout(std::vector<TensorSpec> tensors, int world_size);

  int world_size() const { return world_size_; }
  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  size_t num_units() const { return unit_offset_.size() - 1; }
  size_t numel() const { return numel_; }  ///< real elements, without padding
  size_t padded_numel() const { return unit_offset_.back(); }
  size_t shard_numel() const { return padded_numel() / size_t(world_size_); }

  size_t tensor_offset(size_t t) const { return tensor_offset_[t]; }  ///< flat index
  size_t unit_offset(size_t u) const { return unit_offset_[u]; }      ///< flat index
  size_t unit_numel(size_t u) const { return unit_offset_[u + 1] - unit_offset_[u]; }  ///< padded
  size_t unit_real_numel(size_t u) const { return unit_real_[u]; }  ///< without padding
  size_t block_numel(size_t u) const { return unit_numel(u) / size_t(world_size_); }
  size_t shard_offset(size_t u) const { return unit_offset_[u] / size_t(world_size_); }
  /// First flat index of `rank`'s block of unit u.
  size_t block_offset(size_t u, int rank) const { return unit_offset_[u] + rank * block_numel(u); }
  /// Tensors [first, last) of unit u.
  size_t unit_first_tensor(size_t u) const { return unit_tensor_[u]; }
  size_t unit_last_tensor(size_t u) const { return unit_tensor_[u + 1]; }

 private:
  std::vector<TensorSpec> tensors_;
  int world_size_;
  size_t numel_ = 0;
  std::vector<size_t> tensor_offset_, unit_offset_, unit_real_, unit_tensor_;
};

/// A FlatLayout with float32 storage (zero padded) and per-tensor views.
class FlatBuffer {
 public:
  explicit FlatBuffer(FlatLayout layout);
  const FlatLayout& layout() const { return layout_; }
  std::span<float> data() { return data_; }
  /// Tensor `tensor`'s elements. Throws strata::Error(invalid_argument) for a tensor the layout
  /// lacks.
  std::span<float> view(size_t tensor);
  /// `rank`'s block of unit u. Throws strata::Error(invalid_argument) for a unit or rank the
  /// layout lacks.
  std::span<float> block(size_t unit, int rank);

 private:
  FlatLayout layout_;
  std::vector<float> data_;
};

/// Bucketing of gradients.
struct BucketOptions {
  size_t cap_bytes = 25u << 20;       ///< a bucket closes before it would exceed this
  size_t first_cap_bytes = 1u << 20;  ///< the first bucket is smaller so communication starts early
  bool bf16 = false;  ///< communicate in bfloat16, sum in float32 (see docs/sharding.md)
};

/// What a bucket does with its gradients: all-reduce (DDP, ZeRO-1) or reduce-scatter (ZeRO-2/3).
enum class GradReduction : uint8_t { all_reduce, reduce_scatter };

/// A planned bucket: units [first_unit, last_unit], filled in backward order (highest unit first).
struct BucketInfo {
  size_t first_unit = 0, last_unit = 0;
  size_t bytes = 0;  ///< float32 bytes of the padded units
};

/// Communication timing of one step: total time the collectives ran, and the part the trainer
/// spent blocked waiting on them (exposed).
struct StepStats {
  double comm_seconds = 0, exposed_seconds = 0;
  size_t collectives = 0;
  /// Bytes the collectives moved per rank in nccl-tests' bus sense (all-reduce 2(n-1)/n x size,
  /// all-gather / reduce-scatter (n-1)/n x the gathered size): bus_bytes / comm_seconds is the
  /// bus bandwidth the step achieved.
  double bus_bytes = 0;
  /// The global gradient norm clipping saw (over grad_norm_group too); 0 when clipping is off.
  double grad_norm = 0;
};

/// Gradient buckets. Backward marks each gradient ready; buckets follow descending unit order
/// (backward order); bucket b launches as soon as all its tensors are ready and buckets 0..b-1
/// have launched, so every rank issues the same collectives in the same order whatever order its
/// gradients arrive in. Gradients are averaged over ranks.
class GradBucketer {
 public:
  GradBucketer(Communicator comm, const FlatLayout& layout, GradReduction mode,
               BucketOptions options = {});
  ~GradBucketer();
  GradBucketer(GradBucketer&&) noexcept;

  /// Where the trainer writes tensor t's gradient (overwritten, not accumulated). Valid until
  /// ready(t). With reduce_scatter the storage is a staging buffer freed once the bucket launches.
  std::span<float> grad(size_t tensor);
  /// Marks tensor t's gradient final; launches every bucket that became complete.
  void ready(size_t tensor);
  /// Waits for every bucket (all must be ready); results are then in full_grads()/shard_grads().
  /// Rearms for the next step.
  void finish();

  /// all_reduce: the averaged flat gradient (FlatLayout order).
  std::span<float> full_grads();
  /// reduce_scatter: this rank's shard of the averaged gradient (shard space).
  std::span<float> shard_grads();

  const std::vector<BucketInfo>& buckets() const;
  /// The launches of the current step (after finish(), of the step just finished): bucket index
  /// and how many tensors had been marked ready when it launched (tests check order and timing).
  struct Launch {
    size_t bucket, ready_tensors;
  };
  const std::vector<Launch>& launches() const;
  /// Persistent gradient bytes (full buffer or shard), and the peak of staging buffers.
  size_t grad_bytes() const;
  size_t peak_staging_bytes() const;
  /// Timing since the last take_stats().
  StepStats take_stats();

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// AdamW as torch.optim.AdamW, with clipping by the global gradient norm (0: no clipping).
/// Checked by the engine: lr, weight_decay and max_grad_norm (0: no clipping) finite and >= 0,
/// beta1 and beta2 in [0, 1), eps finite and > 0.
struct AdamWOptions {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.01f;
  float max_grad_norm = 0.0f;
};

/// The engine's update rule.
enum class UpdateRule : uint8_t {
  adamw,  ///< AdamWOptions, every field
  /// torch.optim.SGD without momentum: p -= lr (g + weight_decay p), with AdamWOptions' lr, weight
  /// decay and clipping. No optimizer state: the moments are not kept (state() reports them
  /// zero, set_state() drops them). Linear in the gradient: averaging SGD steps is
  /// averaging gradients, which DiLoCo's check against synchronous training needs.
  sgd,
};

/// Optimizer-state offload (ZeRO-Offload to disk): this rank's AdamW moments live in a scratch
/// file in `optimizer_dir` (created and removed by the engine) and stream through a resident
/// window of `window_bytes`, read ahead and written behind the update. Results are bit-identical.
/// Under UpdateRule::sgd (no moments) it needs `params`: the file then holds the parameters only.
struct OffloadOptions {
  std::string optimizer_dir;  ///< empty: the moments stay in memory
  /// Three chunks of m and v (and p): at least 192 bytes (288 with the parameters, 96 for the
  /// parameters alone under SGD).
  size_t window_bytes = size_t(64) << 20;
  /// Stage 3 only: the parameter shard in the same file, read block by block as units are
  /// gathered and chunk by chunk by the update (ZeRO-Infinity's parameter offload).
  bool params = false;
};

struct ZeroOptions {
  int stage = 0;  ///< 0: DDP, 1: shard optimizer state, 2: + gradients, 3: + parameters
  BucketOptions buckets;
  AdamWOptions adamw;
  UpdateRule rule = UpdateRule::adamw;
  int prefetch_depth = 1;           ///< stage 3: gathers kept in flight beyond the current unit
  size_t resident_below_bytes = 0;  ///< stage 3: units smaller than this are never freed
  /// The ranks holding the rest of the model (tensor- and pipeline-parallel peers, one per other
  /// slice): clipping sums the squared gradient norm over them too, so it sees the whole model.
  /// Empty: this engine's tensors are the whole model.
  Communicator grad_norm_group;
  OffloadOptions offload;
};

/// Bytes per rank. Stage 3 adds resident units to param_bytes; peak_gathered_bytes is the most
/// gathered (non-resident) parameter memory alive at once. With offload, optimizer_bytes is the
/// window (holding chunks of the parameters too when they are offloaded) and the offloaded_*
/// bytes what the file holds; param_bytes then counts the resident and gathered units only.
struct MemoryReport {
  size_t param_bytes = 0, grad_bytes = 0, optimizer_bytes = 0, peak_gathered_bytes = 0;
  size_t offloaded_optimizer_bytes = 0, offloaded_param_bytes = 0;
};

/// Every tensor's parameters and AdamW moments, unpadded, in tensor order, and the steps taken:
/// what moves a model's training state into another layout.
struct EngineState {
  std::vector<float> params, m, v;
  int64_t steps = 0;
};

/// One stage-3 gather event, for tests and debugging.
struct GatherEvent {
  enum Kind : uint8_t { issue, prefetch, free } kind;
  size_t unit;
  size_t live_bytes;  ///< gathered non-resident bytes after the event
};

/// ZeRO data parallelism behind one interface. A step, on every rank in the same order:
///   begin_forward(); for u in 0..U-1: gather(u); read param(t); release(u);
///   begin_backward(); for u in U-1..0: gather(u); write grad(t); ready(t); release(u);
///   step();
/// gather/release only move data in stage 3; in stages 0-2 they are free and may be skipped.
/// In stages 1 and 2, step() leaves the updated parameters' all-gathers running; the first
/// gather(u) or param(t) of the next pass waits for that unit's gather (counted in the next step's
/// StepStats), so the gathers overlap the next forward pass.
class ZeroEngine {
 public:
  ZeroEngine(Communicator comm, std::vector<TensorSpec> tensors, ZeroOptions options = {});
  ~ZeroEngine();

  const FlatLayout& layout() const;
  int stage() const;
  /// Sets tensor t's initial value (every rank passes the same values).
  void set_param(size_t tensor, std::span<const float> value);

  void begin_forward();
  void begin_backward();
  /// Makes unit u's parameters readable, issuing the next prefetch_depth gathers of this pass.
  void gather(size_t unit);
  /// Stage 3: frees unit u's gathered parameters (unless resident).
  void release(size_t unit);
  std::span<const float> param(size_t tensor);
  std::span<float> grad(size_t tensor);
  void ready(size_t tensor);
  /// Waits for the gradients, clips, updates (AdamW) and, in stages 1 and 2, starts the
  /// all-gathers of the updated parameters (see above).
  void step();
  int64_t steps_done() const;
  /// The learning rate of the next step() (schedules call it before each step).
  void set_learning_rate(float lr);

  /// Collective: every parameter, unpadded, in tensor order (for checks and export).
  std::vector<float> full_params();
  /// This rank's block of every unit's parameters, in shard space (layout().shard_numel()
  /// elements): what it owns and updates in stages 1-3, the same blocks of its replica in stage 0.
  /// With set_shard_params, what an optimizer outside the engine (DiLoCo's outer step) works on.
  std::vector<float> shard_params();
  /// Collective: replaces this rank's blocks (shard space) and brings the whole parameters up to
  /// date on every rank: stages 0-2 all-gather them (counted in the next step's StepStats, the
  /// first read of a unit waiting for its gather), stage 3 drops what it had gathered.
  void set_shard_params(std::span<const float> values);
  /// Collective: parameters, moments and step count (for export to another layout; save()
  /// writes the same sharded).
  EngineState state();
  /// Sets tensor t's parameters and AdamW moments (every rank passes the same values).
  void set_state(size_t tensor, std::span<const float> params, std::span<const float> m,
                 std::span<const float> v);
  /// Sets the steps taken (AdamW's bias correction continues from it).
  void set_steps_done(int64_t steps);
  MemoryReport memory() const;
  StepStats last_step_stats() const;
  const std::vector<GatherEvent>& gather_events() const;
  const std::vector<BucketInfo>& buckets() const;
  const GradBucketer& bucketer() const;

  /// Collective: writes a checkpoint under dir (see docs/sharding.md) and makes it the latest.
  void save(const std::string& dir);
  /// Collective: loads the latest complete checkpoint under dir, from any world size.
  void load(const std::string& dir);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata
