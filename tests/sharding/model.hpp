// The small model of the sharding tests: a tanh MLP, one unit per layer (W then b), sizes chosen
// so that no world size 2..4 divides every unit. Forward and backward are per layer so a trainer
// can gather parameters layer by layer (stage 3). Also the plain single-process reference.
#pragma once

#include <span>
#include <vector>

#include "strata/sharding.hpp"

namespace shtest {

/// Samples per optimizer step, split evenly over the ranks (divisible by 1..4).
constexpr size_t kGlobalBatch = 12;

struct Mlp {
  std::vector<size_t> dims = {5, 7, 4, 6, 3};  // units of 42, 32, 30 and 21 elements
  size_t layers() const { return dims.size() - 1; }
  std::vector<strata::TensorSpec> specs() const;
  /// Initial value of tensor t (2l: W_l, dims[l+1] x dims[l]; 2l+1: b_l).
  std::vector<float> init(size_t tensor) const;
};

/// Inputs and targets of samples [first, first + count) of step `step`, row-major.
struct Batch {
  size_t count;
  std::vector<float> x, t;
};
Batch batch(const Mlp& m, int step, size_t first, size_t count);

/// out = act(W in + b) for `count` rows; act is tanh except on the last layer.
void forward_layer(const Mlp& m, size_t l, std::span<const float> W, std::span<const float> b,
                   const std::vector<float>& in, std::vector<float>& out, size_t count);
/// Given dz (gradient at layer l's pre-activation, count rows) and the layer input a: writes gW,
/// gb and, for l > 0, the gradient at layer l-1's pre-activation into dz_prev.
void backward_layer(const Mlp& m, size_t l, std::span<const float> W, const std::vector<float>& a,
                    const std::vector<float>& dz, std::span<float> gW, std::span<float> gb,
                    std::vector<float>& dz_prev, size_t count);

/// dL/dy of the mean squared error 0.5 * |y - t|^2 averaged over the batch's samples.
std::vector<float> loss_grad(const std::vector<float>& y, const Batch& b);

/// One training step of the distributed trainer on this rank's share of the global batch
/// (`global_batch` must divide by `world`).
void train_step(const Mlp& m, strata::ZeroEngine& e, int step, int rank, int world,
                size_t global_batch = kGlobalBatch);
/// ZeroOptions for this model: `stage`, buckets small enough that it fills several, lr 1e-2.
strata::ZeroOptions engine_options(int stage);
/// Sets every parameter of `e` to the model's initial values.
void init_engine(const Mlp& m, strata::ZeroEngine& e);
/// Fills `e` with `st`: every tensor's parameters and moments, and the step count.
void set_state(const Mlp& m, strata::ZeroEngine& e, const strata::EngineState& st);

/// The reference: `steps` full-batch AdamW (or SGD) steps in one process, per-tensor parameters.
std::vector<std::vector<float>> reference(const Mlp& m, const strata::AdamWOptions& o, int steps,
                                          strata::UpdateRule rule = strata::UpdateRule::adamw);
/// Concatenates per-tensor vectors (the layout of ZeroEngine::full_params()).
std::vector<float> concat(const std::vector<std::vector<float>>& v);
/// "" when every element agrees within `rel` relative, else the first mismatch. Values below 1e-2
/// in magnitude (parameters Adam moved through zero) are held to rel * 1e-2: Adam's step is lr
/// whatever the gradient's size, so a rounding-level gradient difference moves them by ~lr * rel.
std::string compare(std::span<const float> got, std::span<const float> want, double rel = 1e-6);

}  // namespace shtest
