// GradBucketer: plans buckets over units in backward order, launches each bucket's collective as
// soon as it is complete, and finishes them (bf16 unpacking, staging freed) in launch order.
#include <algorithm>
#include <chrono>
#include <utility>

#include "sharding/fail.hpp"
#include "strata/sharding.hpp"

namespace strata {
namespace {

using Seconds = std::chrono::duration<double>;

std::vector<BucketInfo> plan_buckets(const FlatLayout& layout, const BucketOptions& o) {
  std::vector<BucketInfo> out;
  // Backward order: the last unit's gradients come first.
  for (size_t u = layout.num_units(); u-- > 0;) {
    const size_t bytes = layout.unit_numel(u) * sizeof(float);
    const size_t limit = out.size() == 1 ? o.first_cap_bytes : o.cap_bytes;  // first bucket: small
    if (!out.empty() && out.back().bytes + bytes <= limit) {
      out.back().first_unit = u;
      out.back().bytes += bytes;
    } else {
      out.push_back(BucketInfo{u, u, bytes});
    }
  }
  return out;
}

}  // namespace

class GradBucketer::Impl {
 public:
  Impl(Communicator comm, const FlatLayout& layout, GradReduction mode, BucketOptions options)
      : comm_(std::move(comm)), layout_(layout), mode_(mode), opt_(options) {
    if (layout_.world_size() != comm_.size())
      fail("layout is for world size " + std::to_string(layout_.world_size()) +
           " but the communicator has " + std::to_string(comm_.size()) + " ranks");
    if (opt_.cap_bytes == 0 || opt_.first_cap_bytes == 0) fail("bucket caps must be > 0");
    buckets_ = plan_buckets(layout_, opt_);
    unit_bucket_.resize(layout_.num_units());
    for (size_t b = 0; b < buckets_.size(); ++b)
      for (size_t u = buckets_[b].first_unit; u <= buckets_[b].last_unit; ++u) unit_bucket_[u] = b;
    if (mode_ == GradReduction::all_reduce)
      full_.assign(layout_.padded_numel(), 0.0f);
    else
      shard_.assign(layout_.shard_numel(), 0.0f);
    staging_.resize(buckets_.size());
    rearm();
  }

  std::span<float> grad(size_t t) {
    check_tensor(t, "grad");
    if (ready_[t]) fail("grad(" + name(t) + ") after ready() in this step");
    const size_t b = unit_bucket_[size_t(layout_.tensors()[t].unit)];
    if (mode_ == GradReduction::all_reduce)
      return std::span<float>(full_).subspan(layout_.tensor_offset(t), numel(t));
    auto& s = staging_[b];
    if (s.empty()) {
      s.assign(bucket_numel(b), 0.0f);  // zeros: padding stays zero
      account(+long(s.size() * sizeof(float)));
    }
    return std::span<float>(s).subspan(layout_.tensor_offset(t) - first_offset(b), numel(t));
  }

  void ready(size_t t) {
    check_tensor(t, "ready");
    if (finished_) {
      launches_.clear();
      finished_ = false;
    }
    if (ready_[t]) fail("ready(" + name(t) + ") twice in one step");
    const size_t b = unit_bucket_[size_t(layout_.tensors()[t].unit)];
    if (mode_ == GradReduction::reduce_scatter && staging_[b].empty())
      fail("ready(" + name(t) + ") without writing its gradient through grad()");
    ready_[t] = true;
    ++ready_count_;
    --remaining_[b];
    // Launch in plan order only, so every rank issues the same sequence.
    while (next_ < buckets_.size() && remaining_[next_] == 0) launch(next_++);
  }

  void finish() {
    if (next_ != buckets_.size()) {
      for (size_t t = 0; t < ready_.size(); ++t)
        if (!ready_[t]) fail("finish() before ready(" + name(t) + ")");
    }
    while (!pending_.empty()) retire(true);
    finished_ = true;
    rearm();
  }

  std::span<float> full_grads() {
    if (mode_ != GradReduction::all_reduce) fail("full_grads() on a reduce_scatter bucketer");
    return full_;
  }
  std::span<float> shard_grads() {
    if (mode_ != GradReduction::reduce_scatter) fail("shard_grads() on an all_reduce bucketer");
    return shard_;
  }

  const std::vector<BucketInfo>& buckets() const { return buckets_; }
  const std::vector<Launch>& launches() const { return launches_; }
  size_t grad_bytes() const { return (full_.size() + shard_.size()) * sizeof(float); }
  size_t peak_staging_bytes() const { return peak_staging_; }
  StepStats take_stats() { return std::exchange(stats_, StepStats{}); }

 private:
  struct Pending {
    size_t bucket;
    Work work;
    std::vector<float> send;  // packed fp32 (reduce_scatter)
    std::vector<bf16_t> send16, recv16;
  };

  [[noreturn]] void fail(const std::string& what) const {
    sharding::fail("GradBucketer", comm_ ? comm_.rank() : -1, what);
  }
  void check_tensor(size_t t, const char* op) const {
    if (t >= layout_.tensors().size())
      fail(std::string(op) + "(" + std::to_string(t) + "): only " +
           std::to_string(layout_.tensors().size()) + " tensors");
  }
  std::string name(size_t t) const { return layout_.tensors()[t].name; }
  size_t numel(size_t t) const { return layout_.tensors()[t].numel(); }
  size_t first_offset(size_t b) const { return layout_.unit_offset(buckets_[b].first_unit); }
  size_t bucket_numel(size_t b) const {
    return layout_.unit_offset(buckets_[b].last_unit + 1) - first_offset(b);
  }
  void account(long delta) {
    staging_bytes_ += delta;
    peak_staging_ = std::max(peak_staging_, size_t(staging_bytes_));
  }

  void rearm() {
    ready_.assign(layout_.tensors().size(), false);
    remaining_.assign(buckets_.size(), 0);
    for (const TensorSpec& s : layout_.tensors()) ++remaining_[unit_bucket_[size_t(s.unit)]];
    ready_count_ = 0;
    next_ = 0;
  }

  void launch(size_t b) {
    launches_.push_back(Launch{b, ready_count_});
    const int n = comm_.size();
    const size_t len = bucket_numel(b), blk = len / size_t(n);
    Pending p{b, {}, {}, {}, {}};
    if (mode_ == GradReduction::all_reduce) {
      float* g = full_.data() + first_offset(b);
      if (opt_.bf16) {
        // Every rank receives all n bf16 copies and sums them in fp32 in rank order.
        p.send16.resize(len);
        for (size_t i = 0; i < len; ++i) p.send16[i] = to_bf16(g[i]);
        p.recv16.resize(len * size_t(n));
        p.work = comm_.all_gather(buffer(p.send16), buffer(p.recv16));
        stats_.bus_bytes += gather_bus_bytes(p.recv16.size() * sizeof(bf16_t), n);
      } else {
        p.work = comm_.all_reduce(Buffer{g, len, DataType::f32}, ReduceOp::avg);
        stats_.bus_bytes += all_reduce_bus_bytes(len * sizeof(float), n);
      }
    } else {
      // Pack rank-major: block q holds rank q's block of every unit of the bucket, so one
      // collective delivers this rank's shard of all of them, contiguous in shard space.
      std::vector<float>& s = staging_[b];
      std::vector<float> packed(len);
      const size_t base = first_offset(b), sbase = layout_.shard_offset(buckets_[b].first_unit);
      for (size_t u = buckets_[b].first_unit; u <= buckets_[b].last_unit; ++u) {
        const size_t ub = layout_.block_numel(u);
        for (int q = 0; q < n; ++q)
          std::copy_n(s.data() + layout_.block_offset(u, q) - base, ub,
                      packed.data() + q * blk + layout_.shard_offset(u) - sbase);
      }
      account(-long(s.size() * sizeof(float)));
      std::vector<float>().swap(s);  // the full gradient is no longer needed
      if (opt_.bf16) {
        p.send16.resize(len);
        for (size_t i = 0; i < len; ++i) p.send16[i] = to_bf16(packed[i]);
        p.recv16.resize(len);
        p.work = comm_.all_to_all(buffer(p.send16), buffer(p.recv16));
        stats_.bus_bytes += gather_bus_bytes(len * sizeof(bf16_t), n);
      } else {
        p.send = std::move(packed);
        p.work = comm_.reduce_scatter(
            buffer(p.send), Buffer{shard_.data() + sbase, blk, DataType::f32}, ReduceOp::avg);
        stats_.bus_bytes += gather_bus_bytes(len * sizeof(float), n);
      }
    }
    account(
        long(p.send.size() * sizeof(float) + (p.send16.size() + p.recv16.size()) * sizeof(bf16_t)));
    pending_.push_back(std::move(p));
    ++stats_.collectives;
    // Free what already completed, so staging stays bounded during a long backward.
    while (!pending_.empty() && pending_.front().work.test()) retire(false);
  }

  // Completes the oldest pending bucket: waits (timing the wait as exposed) and unpacks bf16.
  void retire(bool wait) {
    Pending& p = pending_.front();
    if (wait) {
      const auto t0 = std::chrono::steady_clock::now();
      p.work.wait();
      stats_.exposed_seconds += Seconds(std::chrono::steady_clock::now() - t0).count();
    }
    stats_.comm_seconds += p.work.elapsed_seconds();
    if (opt_.bf16) unpack_bf16(p);
    account(-long(p.send.size() * sizeof(float) +
                  (p.send16.size() + p.recv16.size()) * sizeof(bf16_t)));
    pending_.erase(pending_.begin());
  }

  void unpack_bf16(const Pending& p) {
    const size_t n = size_t(comm_.size());
    const float inv = 1.0f / float(n);
    if (mode_ == GradReduction::all_reduce) {
      const size_t len = p.send16.size();
      float* g = full_.data() + first_offset(p.bucket);
      for (size_t i = 0; i < len; ++i) {
        float acc = 0.0f;
        for (size_t q = 0; q < n; ++q) acc += to_float(p.recv16[q * len + i]);
        g[i] = acc * inv;
      }
    } else {
      const size_t blk = p.recv16.size() / n;
      float* g = shard_.data() + layout_.shard_offset(buckets_[p.bucket].first_unit);
      for (size_t i = 0; i < blk; ++i) {
        float acc = 0.0f;
        for (size_t q = 0; q < n; ++q) acc += to_float(p.recv16[q * blk + i]);
        g[i] = acc * inv;
      }
    }
  }

  Communicator comm_;
  FlatLayout layout_;
  GradReduction mode_;
  BucketOptions opt_;
  std::vector<BucketInfo> buckets_;
  std::vector<size_t> unit_bucket_;
  std::vector<float> full_, shard_;
  std::vector<std::vector<float>> staging_;
  std::vector<bool> ready_;
  std::vector<size_t> remaining_;
  size_t ready_count_ = 0, next_ = 0;
  bool finished_ = false;
  std::vector<Pending> pending_;
  std::vector<Launch> launches_;
  long staging_bytes_ = 0;
  size_t peak_staging_ = 0;
  StepStats stats_;
};

GradBucketer::GradBucketer(Communicator comm, const FlatLayout& layout, GradReduction mode,
                           BucketOptions options)
    : impl_(std::make_unique<Impl>(std::move(comm), layout, mode, options)) {}
GradBucketer::~GradBucketer() = default;
GradBucketer::GradBucketer(GradBucketer&&) noexcept = default;
std::span<float> GradBucketer::grad(size_t t) { return impl_->grad(t); }
void GradBucketer::ready(size_t t) { impl_->ready(t); }
void GradBucketer::finish() { impl_->finish(); }
std::span<float> GradBucketer::full_grads() { return impl_->full_grads(); }
std::span<float> GradBucketer::shard_grads() { return impl_->shard_grads(); }
const std::vector<BucketInfo>& GradBucketer::buckets() const { return impl_->buckets(); }
const std::vector<GradBucketer::Launch>& GradBucketer::launches() const {
  return impl_->launches();
}
size_t GradBucketer::grad_bytes() const { return impl_->grad_bytes(); }
size_t GradBucketer::peak_staging_bytes() const { return impl_->peak_staging_bytes(); }
StepStats GradBucketer::take_stats() { return impl_->take_stats(); }

}  // namespace strata
