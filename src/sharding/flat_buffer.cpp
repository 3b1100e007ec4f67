// FlatLayout (the shard map) and FlatBuffer (its storage).
#include "sharding/fail.hpp"
#include "strata/sharding.hpp"

namespace strata {

size_t TensorSpec::numel() const {
  size_t n = 1;
  for (size_t d : shape) n *= d;
  return n;
}

FlatLayout::FlatLayout(std::vector<TensorSpec> tensors, int world_size)
    : tensors_(std::move(tensors)), world_size_(world_size) {
  if (world_size < 1) sharding::fail("FlatLayout", -1, "world size must be >= 1");
  if (tensors_.empty()) sharding::fail("FlatLayout", -1, "no tensors");
  const size_t n = size_t(world_size);
  unit_offset_.push_back(0);
  unit_tensor_.push_back(0);
  size_t flat = 0, unit_start = 0;
  int unit = 0;
  auto close_unit = [&](size_t next_tensor) {
    unit_real_.push_back(flat - unit_start);
    flat = unit_start + (flat - unit_start + n - 1) / n * n;  // pad the unit to a multiple of n
    unit_offset_.push_back(flat);
    unit_tensor_.push_back(next_tensor);
    unit_start = flat;
  };
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const TensorSpec& s = tensors_[t];
    if (s.unit == unit + 1 && t > 0) {
      close_unit(t);
      ++unit;
    } else if (s.unit != unit) {
      sharding::fail("FlatLayout", -1,
                     "tensor " + s.name + " has unit " + std::to_string(s.unit) + ", expected " +
                         std::to_string(unit) + " or " + std::to_string(unit + 1) +
                         " (units numbered in order, tensors of a unit adjacent)");
    }
    tensor_offset_.push_back(flat);
    flat += s.numel();
    numel_ += s.numel();
  }
  close_unit(tensors_.size());
}

FlatBuffer::FlatBuffer(FlatLayout layout)
    : layout_(std::move(layout)), data_(layout_.padded_numel(), 0.0f) {}

std::span<float> FlatBuffer::view(size_t tensor) {
  if (tensor >= layout_.tensors().size()) {
    sharding::fail("FlatBuffer::view", -1,
                   "tensor " + std::to_string(tensor) + " of a layout of " +
                       std::to_string(layout_.tensors().size()) + " tensors");
  }
  return std::span<float>(data_).subspan(layout_.tensor_offset(tensor),
                                         layout_.tensors()[tensor].numel());
}

std::span<float> FlatBuffer::block(size_t unit, int rank) {
  if (unit >= layout_.num_units() || rank < 0 || rank >= layout_.world_size()) {
    sharding::fail("FlatBuffer::block", rank,
                   "block of unit " + std::to_string(unit) + " and rank " + std::to_string(rank) +
                       " of a layout of " + std::to_string(layout_.num_units()) + " units over " +
                       std::to_string(layout_.world_size()) + " ranks");
  }
  return std::span<float>(data_).subspan(layout_.block_offset(unit, rank),
                                         layout_.block_numel(unit));
}

}  // namespace strata
