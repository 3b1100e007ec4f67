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
#include "strata/diloco.hpp"

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

/// How many islands wrote the checkpoint in DIR (DIR/islands, which islands' checkpoints hold:
/// DIR/island-P for the island at place P of those training), 0 for one written without DiLoCo.
int saved_islands(const std::string& dir);
/// Writes DIR/islands.
void write_saved_islands(const std::string& dir, int islands);

/// DiLoCo's outer state of one rank (strata::OuterState, shard space) and the layout that wrote
/// it, in DIR/outer-rank-R.bin, each rank of an island its own file (same writing as above):
///   "STRATAOUT" u32 version | i64 inner steps | u32 length, layout | u64 n | f32 snapshot[n]
///   | f32 momentum[n] | u64 FNV-1a
void write_outer_checkpoint(const std::string& dir, int rank, const strata::OuterState& s,
                            const std::string& layout);
/// Throws std::invalid_argument when another layout wrote it (naming both), std::runtime_error
/// naming the path for a missing, truncated or corrupt file.
strata::OuterState read_outer_checkpoint(const std::string& dir, int rank,
                                         const std::string& layout);

}  // namespace gpt
