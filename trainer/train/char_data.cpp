// Character-level corpus: vocabulary, split and layout-independent global batches.
#include "train/char_data.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

namespace gpt {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::string describe_byte(unsigned char b) {
  char buf[32];
  if (b >= 0x20 && b < 0x7f)
    std::snprintf(buf, sizeof buf, "'%c' (0x%02x)", b, b);
  else
    std::snprintf(buf, sizeof buf, "0x%02x", b);
  return buf;
}

const char* split_name(Split s) { return s == Split::train ? "train" : "val"; }

}  // namespace

CharCorpus::CharCorpus(const std::string& path, double val_fraction) : path_(path) {
  if (!(val_fraction >= 0.0 && val_fraction < 1.0))
    throw std::invalid_argument("gpt::CharCorpus: val_fraction must be in [0, 1)");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))  // reading one fails deep in the stream library
    throw std::runtime_error("gpt::CharCorpus: '" + path + "' is a directory, not a text file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("gpt::CharCorpus: cannot open '" + path + "'");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error("gpt::CharCorpus: error reading '" + path + "'");
  if (text.size() < 2)
    throw std::runtime_error("gpt::CharCorpus: '" + path + "' has " + std::to_string(text.size()) +
                             " bytes, too short to hold a sequence");

  // Vocabulary: the distinct bytes of the whole corpus, sorted, so ids do not depend on the split.
  std::array<bool, 256> seen{};
  for (unsigned char b : text) seen[b] = true;
  id_.assign(256, -1);
  for (int b = 0; b < 256; ++b) {
    if (!seen[size_t(b)]) continue;
    id_[size_t(b)] = int(chars_.size());
    chars_.push_back(char(b));
  }

  const size_t n = text.size();
  const size_t n_val = size_t(double(n) * val_fraction);
  train_.reserve(n - n_val);
  val_.reserve(n_val);
  for (size_t i = 0; i < n; ++i)
    (i < n - n_val ? train_ : val_).push_back(id_[(unsigned char)text[i]]);
}

std::vector<int> CharCorpus::encode(std::string_view text) const {
  std::vector<int> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char b = (unsigned char)text[i];
    if (id_[b] < 0)
      throw std::runtime_error("gpt::CharCorpus::encode: byte " + describe_byte(b) + " at offset " +
                               std::to_string(i) + " is not in the vocabulary of '" + path_ + "'");
    out.push_back(id_[b]);
  }
  return out;
}

std::string CharCorpus::decode(std::span<const int> tokens) const {
  std::string out;
  out.reserve(tokens.size());
  for (int t : tokens) {
    if (t < 0 || t >= vocab())
      throw std::runtime_error("gpt::CharCorpus::decode: token " + std::to_string(t) +
                               " outside [0, " + std::to_string(vocab()) + ")");
    out.push_back(chars_[size_t(t)]);
  }
  return out;
}

size_t CharCorpus::size(Split split) const {
  return (split == Split::train ? train_ : val_).size();
}

void CharCorpus::batch(Split split, uint64_t seed, uint64_t step, size_t first, size_t count, int T,
                       std::vector<int>& tokens, std::vector<int>& targets) const {
  const std::vector<int>& data = split == Split::train ? train_ : val_;
  if (T < 1) throw std::invalid_argument("gpt::CharCorpus::batch: T must be positive");
  // A sequence needs T tokens and the T targets one further; starts are drawn below size - T - 1.
  if (data.size() < size_t(T) + 2)
    throw std::runtime_error("gpt::CharCorpus::batch: the " + std::string(split_name(split)) +
                             " split of '" + path_ + "' has " + std::to_string(data.size()) +
                             " tokens, too few for sequences of " + std::to_string(T));
  const uint64_t range = data.size() - size_t(T) - 1;
  tokens.resize(count * size_t(T));
  targets.resize(count * size_t(T));
  // The start of sequence i hashes (seed, split, step, i) only: any rank computing any slice of
  // the global batch draws the same sequences.
  const uint64_t key = splitmix64(splitmix64(splitmix64(seed) ^ uint64_t(split)) ^ step);
  for (size_t s = 0; s < count; ++s) {
    const uint64_t i = first + s;
    const size_t start = size_t(splitmix64(key ^ splitmix64(i)) % range);
    std::copy_n(data.begin() + ptrdiff_t(start), T, tokens.begin() + ptrdiff_t(s * size_t(T)));
    std::copy_n(data.begin() + ptrdiff_t(start) + 1, T, targets.begin() + ptrdiff_t(s * size_t(T)));
  }
}

}  // namespace gpt
