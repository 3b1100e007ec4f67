// Character-level data for the reference GPT: a vocabulary of the corpus's distinct bytes, a
// train / validation split, and global batches that any data-parallel layout slices the same way.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpt {

enum class Split { train, val };

class CharCorpus {
 public:
  /// Reads the whole file; the last `val_fraction` of it is the validation split. Throws
  /// std::runtime_error naming the path if it cannot be read or is too short to hold a sequence.
  explicit CharCorpus(const std::string& path, double val_fraction = 0.1);

  int vocab() const { return int(chars_.size()); }
  std::vector<int> encode(std::string_view text) const;  ///< throws on a byte not in the corpus
  std::string decode(std::span<const int> tokens) const;

  /// Sequences [first, first + count) of global batch `step` of `split`: tokens and next-token
  /// targets, count * T each, sequence by sequence. Sequence i's start is a function of
  /// (seed, split, step, i) only, so the global batch is the same for any data-parallel layout.
  void batch(Split split, uint64_t seed, uint64_t step, size_t first, size_t count, int T,
             std::vector<int>& tokens, std::vector<int>& targets) const;

  size_t size(Split split) const;  ///< tokens in the split

 private:
  std::string path_;
  std::string chars_;    // token id -> byte
  std::vector<int> id_;  // byte -> token id, -1 if absent
  std::vector<int> train_, val_;
};

}  // namespace gpt
