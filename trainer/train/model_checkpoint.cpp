#include "train/model_checkpoint.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace gpt {

namespace {

constexpr char kMagic[] = "STRATAGPT";
// 2: the mixture of experts' shape (experts, moe_every) after the dimensions; 1 had none.
constexpr uint32_t kVersion = 2;
const char kFile[] = "gpt-checkpoint.bin";

class Writer {
 public:
  template <typename T>
  void put(const T& v) {
    bytes(&v, sizeof v);
  }
  void bytes(const void* p, size_t n) {
    const auto* c = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) hash_ = (hash_ ^ c[i]) * 1099511628211ull;
    out_.append(static_cast<const char*>(p), n);
  }
  void floats(const std::vector<float>& v) { bytes(v.data(), v.size() * sizeof(float)); }
  std::string finish() {
    const uint64_t h = hash_;
    out_.append(reinterpret_cast<const char*>(&h), sizeof h);
    return std::move(out_);
  }

 private:
  std::string out_;
  uint64_t hash_ = 1469598103934665603ull;
};

class Reader {
 public:
  Reader(std::string data, std::string path) : data_(std::move(data)), path_(std::move(path)) {}
  template <typename T>
  T get() {
    T v;
    bytes(&v, sizeof v);
    return v;
  }
  void bytes(void* p, size_t n) {
    if (n > data_.size() - at_) fail("truncated");
    std::memcpy(p, data_.data() + at_, n);
    at_ += n;
  }
  std::vector<float> floats(size_t n) {
    std::vector<float> v(n);
    bytes(v.data(), n * sizeof(float));
    return v;
  }
  bool at_checksum() const { return data_.size() - at_ == sizeof(uint64_t); }
  uint64_t hash_before_checksum() const {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < at_; ++i)
      h = (h ^ static_cast<unsigned char>(data_[i])) * 1099511628211ull;
    return h;
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw std::runtime_error("checkpoint " + path_ + ": " + why);
  }

 private:
  std::string data_, path_;
  size_t at_ = 0;
};

// Writes `data` to a temporary name beside `path` and renames it, so that no reader sees half a
// file.
void publish(const std::filesystem::path& path, const std::string& data) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(data.data(), std::streamsize(data.size()));
    f.flush();
    if (!f) throw std::runtime_error("checkpoint " + tmp.string() + ": cannot write");
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw std::runtime_error("checkpoint " + path.string() + ": " + ec.message());
}

Reader open_file(const std::string& path, const char* magic, const char* what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("checkpoint " + path + ": cannot open");
  Reader r(std::string(std::istreambuf_iterator<char>(f), {}), path);
  std::string got(std::strlen(magic), '\0');
  r.bytes(got.data(), got.size());
  if (got != magic) r.fail(std::string("not ") + what);
  return r;
}

void check_sum(Reader& r) {
  if (!r.at_checksum()) r.fail("trailing bytes");
  const uint64_t want = r.hash_before_checksum();
  if (r.get<uint64_t>() != want) r.fail("checksum mismatch (corrupt)");
}

}  // namespace

void write_checkpoint(const std::string& dir, const WholeState& s) {
  const auto specs = param_specs(s.model);
  Writer w;
  w.bytes(kMagic, sizeof kMagic - 1);
  w.put(kVersion);
  w.put(s.step);
  for (int x : {s.model.vocab, s.model.ctx, s.model.layers, s.model.heads, s.model.embd,
                s.model.experts, s.model.moe_every})
    w.put(int32_t(x));
  w.put(uint32_t(specs.size()));
  for (const auto& t : specs) {
    w.put(uint32_t(t.name.size()));
    w.bytes(t.name.data(), t.name.size());
    w.put(uint64_t(t.numel()));
  }
  w.floats(s.params);
  w.floats(s.m);
  w.floats(s.v);
  publish(std::filesystem::path(dir) / kFile, w.finish());
}

WholeState read_checkpoint(const std::string& dir) {
  Reader r =
      open_file((std::filesystem::path(dir) / kFile).string(), kMagic, "a strata-gpt checkpoint");
  const auto version = r.get<uint32_t>();
  if (version < 1 || version > kVersion)
    r.fail("version " + std::to_string(version) + ", this build reads 1 to " +
           std::to_string(kVersion));
  WholeState s;
  s.step = r.get<int64_t>();
  for (int* x : {&s.model.vocab, &s.model.ctx, &s.model.layers, &s.model.heads, &s.model.embd})
    *x = r.get<int32_t>();
  if (version >= 2) {
    s.model.experts = r.get<int32_t>();
    s.model.moe_every = r.get<int32_t>();
    if (s.model.experts < 0 || s.model.moe_every < 1) r.fail("bad mixture-of-experts shape");
  }
  const auto specs = param_specs(s.model);
  if (r.get<uint32_t>() != specs.size()) r.fail("tensor count differs from its configuration");
  size_t total = 0;
  for (const auto& t : specs) {
    std::string name(r.get<uint32_t>(), '\0');
    r.bytes(name.data(), name.size());
    if (name != t.name || r.get<uint64_t>() != t.numel())
      r.fail("tensor " + name + " differs from " + t.name + " of its configuration");
    total += t.numel();
  }
  s.params = r.floats(total);
  s.m = r.floats(total);
  s.v = r.floats(total);
  check_sum(r);
  return s;
}

int saved_islands(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "islands").string();
  std::ifstream f(path);
  if (!f) return 0;
  int k = 0;
  if (!(f >> k) || k < 1)
    throw std::runtime_error("checkpoint " + path + ": not a count of islands");
  return k;
}

void write_saved_islands(const std::string& dir, int islands) {
  publish(std::filesystem::path(dir) / "islands", std::to_string(islands) + "\n");
}

namespace {
constexpr char kOuterMagic[] = "STRATAOUT";
constexpr uint32_t kOuterVersion = 1;
std::string outer_file(const std::string& dir, int rank) {
  return (std::filesystem::path(dir) / ("outer-rank-" + std::to_string(rank) + ".bin")).string();
}
}  // namespace

void write_outer_checkpoint(const std::string& dir, int rank, const strata::OuterState& s,
                            const std::string& layout) {
  Writer w;
  w.bytes(kOuterMagic, sizeof kOuterMagic - 1);
  w.put(kOuterVersion);
  w.put(int64_t(s.inner_steps));
  w.put(uint32_t(layout.size()));
  w.bytes(layout.data(), layout.size());
  w.put(uint64_t(s.snapshot.size()));
  w.floats(s.snapshot);
  w.floats(s.momentum);
  publish(outer_file(dir, rank), w.finish());
}

strata::OuterState read_outer_checkpoint(const std::string& dir, int rank,
                                         const std::string& layout) {
  Reader r = open_file(outer_file(dir, rank), kOuterMagic, "a DiLoCo outer state");
  if (const auto v = r.get<uint32_t>(); v != kOuterVersion)
    r.fail("version " + std::to_string(v) + ", this build reads " + std::to_string(kOuterVersion));
  strata::OuterState s;
  s.inner_steps = r.get<int64_t>();
  std::string wrote(r.get<uint32_t>(), '\0');
  r.bytes(wrote.data(), wrote.size());
  if (wrote != layout)
    throw std::invalid_argument("checkpoint " + outer_file(dir, rank) +
                                ": written by islands laid out as " + wrote + ", resumed as " +
                                layout + " (DiLoCo's outer state needs the same layout)");
  const auto n = size_t(r.get<uint64_t>());
  s.snapshot = r.floats(n);
  s.momentum = r.floats(n);
  check_sum(r);
  return s;
}

}  // namespace gpt
