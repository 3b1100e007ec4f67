#include "parallel/tensor_parallel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "parallel/planted_fault.hpp"
#include "parallel/sequence_parallel.hpp"

namespace gpt {

// ---- which slice a rank holds ------------------------------------------------------------------

TpSplit tp_split(const std::string& tensor_name) {
  const size_t dot = tensor_name.find('.');
  const std::string base = dot == std::string::npos ? tensor_name : tensor_name.substr(dot + 1);
  if (base == "wte") return TpSplit::vocab;
  if (base == "attn_w" || base == "attn_b") return TpSplit::qkv_rows;
  if (base == "fc_w" || base == "fc_b") return TpSplit::rows;
  if (base == "proj_w" || base == "fcproj_w") return TpSplit::columns;
  return TpSplit::replicated;
}

bool is_layernorm(const std::string& tensor_name) {
  const size_t dot = tensor_name.find('.');
  return tensor_name.compare(dot == std::string::npos ? 0 : dot + 1, 2, "ln") == 0;
}

int padded_vocab(int vocab, int tp) { return (vocab + tp - 1) / tp * tp; }

namespace {

constexpr size_t kZeros = std::numeric_limits<size_t>::max();

// A run of `count` elements of the full tensor starting at `offset` (kZeros: padding).
struct Run {
  size_t offset, count;
};

// The runs of the full tensor that make up rank r's slice, in slice order.
std::vector<Run> slice_runs(const Config& c, const strata::TensorSpec& s, int tp, int r) {
  const size_t rows = s.shape[0], cols = s.shape.size() > 1 ? s.shape[1] : 1;
  switch (tp_split(s.name)) {
    case TpSplit::replicated:
      return {{0, rows * cols}};
    case TpSplit::rows: {
      const size_t per = rows / size_t(tp);
      return {{r * per * cols, per * cols}};
    }
    case TpSplit::qkv_rows: {
      if (planted(Fault::contiguous_qkv))
        return {{r * rows / size_t(tp) * cols, rows / size_t(tp) * cols}};
      const size_t per = rows / 3 / size_t(tp);
      std::vector<Run> out;
      for (size_t k = 0; k < 3; ++k) out.push_back({(k * rows / 3 + r * per) * cols, per * cols});
      return out;
    }
    case TpSplit::columns: {
      const size_t per = cols / size_t(tp);
      std::vector<Run> out;
      for (size_t i = 0; i < rows; ++i) out.push_back({i * cols + r * per, per});
      return out;
    }
    case TpSplit::vocab: {
      const size_t per = size_t(padded_vocab(c.vocab, tp)) / size_t(tp), lo = r * per;
      const size_t real = std::min(per, rows > lo ? rows - lo : 0);
      std::vector<Run> out;
      if (real) out.push_back({lo * cols, real * cols});
      if (real < per) out.push_back({kZeros, (per - real) * cols});
      return out;
    }
  }
  return {};
}

}  // namespace

std::vector<strata::TensorSpec> tp_param_specs(const Config& c, int tp) {
  if (tp < 1 || c.heads % tp != 0)
    throw std::invalid_argument("tensor parallelism: " + std::to_string(c.heads) +
                                " heads do not divide by tp=" + std::to_string(tp));
  std::vector<strata::TensorSpec> specs = param_specs(c);
  for (auto& s : specs) {
    switch (tp_split(s.name)) {
      case TpSplit::replicated:
        break;
      case TpSplit::rows:
      case TpSplit::qkv_rows:
        s.shape[0] /= size_t(tp);
        break;
      case TpSplit::columns:
        s.shape[1] /= size_t(tp);
        break;
      case TpSplit::vocab:
        s.shape[0] = size_t(padded_vocab(c.vocab, tp) / tp);
        break;
    }
  }
  return specs;
}

std::vector<float> tp_slice(const Config& c, size_t t, std::span<const float> full, int tp, int r) {
  const auto specs = param_specs(c);
  std::vector<float> out;
  for (const Run& run : slice_runs(c, specs.at(t), tp, r)) {
    if (run.offset == kZeros)
      out.insert(out.end(), run.count, 0.0f);
    else
      out.insert(out.end(), full.begin() + long(run.offset),
                 full.begin() + long(run.offset + run.count));
  }
  return out;
}

void tp_place(const Config& c, size_t t, std::span<const float> slice, int tp, int r,
              std::span<float> full) {
  size_t at = 0;
  for (const Run& run : slice_runs(c, param_specs(c).at(t), tp, r)) {
    if (run.offset != kZeros)
      std::copy_n(slice.begin() + long(at), run.count, full.begin() + long(run.offset));
    at += run.count;
  }
}

std::vector<float> tp_unslice(const Config& c, size_t t,
                              const std::vector<std::vector<float>>& slices) {
  std::vector<float> full(param_specs(c).at(t).numel());
  for (size_t r = 0; r < slices.size(); ++r)
    tp_place(c, t, slices[r], int(slices.size()), int(r), full);
  return full;
}

// ---- the group's collectives -------------------------------------------------------------------

TensorParallel::TensorParallel(strata::Communicator group, bool sequence_parallel)
    : group_(std::move(group)), sp_(sequence_parallel) {}

size_t TensorParallel::local_rows(int B, int T) const {
  return sp_ ? size_t(B) * size_t(T / size()) : size_t(B) * size_t(T);
}

int TensorParallel::position(size_t i, int T) const {
  if (!sp_) return int(i % size_t(T));
  const size_t run = size_t(T / size());
  return int(size_t(rank()) * run + i % run);
}

namespace {
// nccl-tests' bus bytes: all-reduce 2(n-1)/n of the buffer, all-gather and reduce-scatter (n-1)/n
// of the whole (gathered) buffer.
}  // namespace

std::vector<strata::TensorSpec> TensorParallel::local_specs(const Config& c) const {
  return tp_param_specs(c, size());
}

int TensorParallel::vocab_share(int vocab) const { return padded_vocab(vocab, size()) / size(); }

const float* TensorParallel::gather_rows(const float* local, float* full, int B, int T, int C) {
  if (!sp_ || size() == 1) return local;
  bus_bytes_ += strata::gather_bus_bytes(sizeof(float) * B * T * C, size());
  timed([&] { sp::all_gather_rows(group_, local, full, staging_, B, T, C); });
  return full;
}

float* TensorParallel::reduce_rows(float* partial, float* local, int B, int T, int C) {
  if (size() == 1) return partial;
  if (!sp_) {
    bus_bytes_ += strata::all_reduce_bus_bytes(sizeof(float) * B * T * C, size());
    timed([&] {
      group_.all_reduce(strata::Buffer{partial, size_t(B) * T * C}, strata::ReduceOp::sum).wait();
    });
    return partial;
  }
  bus_bytes_ += strata::gather_bus_bytes(sizeof(float) * B * T * C, size());
  timed([&] { sp::reduce_scatter_rows(group_, partial, local, staging_, B, T, C); });
  return local;
}

double TensorParallel::cross_entropy(float* probs, const float* logits, const int* targets, int N,
                                     int Vl, int first, int V) {
  const int real = std::clamp(V - first, 0, Vl);  // columns past V are padding
  row_max_.assign(size_t(N), -std::numeric_limits<float>::infinity());
  for (int n = 0; n < N; ++n)
    for (int i = 0; i < real; ++i) row_max_[n] = std::max(row_max_[n], logits[size_t(n) * Vl + i]);
  timed([&] { group_.all_reduce(strata::buffer(row_max_), strata::ReduceOp::max).wait(); });
  bus_bytes_ += strata::all_reduce_bus_bytes(sizeof(float) * N, size());
  // Per row: the sum of exponentials over this rank's columns, and the target's logit (minus the
  // max) if this rank holds the target: both summed over the group in one all-reduce.
  row_sums_.assign(2 * size_t(N), 0.0);
  for (int n = 0; n < N; ++n) {
    const float* z = logits + size_t(n) * Vl;
    float* p = probs + size_t(n) * Vl;
    const float mx = row_max_[n];
    double sum = 0;
    for (int i = 0; i < real; ++i) sum += p[i] = std::exp(z[i] - mx);
    std::fill(p + real, p + Vl, 0.0f);
    row_sums_[n] = sum;
    if (targets && targets[n] >= first && targets[n] < first + real)
      row_sums_[size_t(N) + n] = double(z[targets[n] - first] - mx);
  }
  timed([&] { group_.all_reduce(strata::buffer(row_sums_), strata::ReduceOp::sum).wait(); });
  bus_bytes_ += strata::all_reduce_bus_bytes(sizeof(double) * 2 * N, size());
  double total = 0;
  for (int n = 0; n < N; ++n) {
    const float inv = float(1.0 / row_sums_[n]);
    float* p = probs + size_t(n) * Vl;
    for (int i = 0; i < real; ++i) p[i] *= inv;
    if (targets) total += std::log(row_sums_[n]) - row_sums_[size_t(N) + n];
  }
  return total;
}

void TensorParallel::all_gather_sequences(float* all, size_t count) {
  const size_t n = count * size_t(size());
  bus_bytes_ += strata::gather_bus_bytes(sizeof(float) * n, size());
  timed([&] {
    group_.all_gather(strata::Buffer{all + size_t(rank()) * count, count}, strata::Buffer{all, n})
        .wait();
  });
}

void TensorParallel::all_reduce_sum(std::span<float> v) {
  if (size() == 1) return;
  bus_bytes_ += strata::all_reduce_bus_bytes(v.size_bytes(), size());
  timed([&] { group_.all_reduce(strata::buffer(v), strata::ReduceOp::sum).wait(); });
}

double TensorParallel::take_bus_bytes() { return std::exchange(bus_bytes_, 0.0); }
double TensorParallel::take_seconds() { return std::exchange(seconds_, 0.0); }

}  // namespace gpt
