// The reference GPT's checkpoint: the whole model's parameters and AdamW moments in param_specs
// order, whatever layout wrote it, so that a run saved under tp2 pp2 resumes under dp4 (or any
// other layout). One file, DIR/gpt-checkpoint.bin, written by one rank to a temporary name and
// renamed, so a reader never sees half of one:
//   "STRATAGPT" u32 version | i64 step | i32 vocab ctx layers heads embd | u32 tensors
//   | per tensor: u32 name length, name, u64 elements | f32 params | f32 m | f32 v | u64 FNV-1a
// Little-endian (the machines this runs on).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt_model.hpp"

namespace gpt {

struct WholeState {
  Config model;
  int64_t step = 0;
  std::vector<float> params, m, v;  ///< every tensor of param_specs(model), back to back
};

/// Writes `s` to DIR/gpt-checkpoint.bin (creating DIR). Throws std::runtime_error naming the path.
void write_checkpoint(const std::string& dir, const WholeState& s);
/// Reads DIR/gpt-checkpoint.bin. Throws std::runtime_error naming the path and what is wrong
/// (missing, truncated, corrupt, or tensors that differ from the configuration it names).
WholeState read_checkpoint(const std::string& dir);

}  // namespace gpt
