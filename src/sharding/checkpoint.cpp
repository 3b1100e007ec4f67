// Sharded checkpoints. Layout under a checkpoint root:
//   LATEST                              one line: the name of the last complete checkpoint
//   step-<step>-<nonce>/manifest.txt    world size, tensors, one line per shard with its checksum
//   step-<step>-<nonce>/shard-<r>-of-<n>.bin   header + params, m, v of rank r's shard space
// The commit point is the rename of LATEST: a crash before it leaves the previous one in force.
#include "sharding/checkpoint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include "sharding/fail.hpp"

namespace strata::sharding {
namespace {

constexpr char kMagic[8] = {'S', 'T', 'R', 'A', 'T', 'A', 'S', 'H'};
constexpr size_t kHeaderBytes = 32;  // magic, version, rank, world, 0, shard elements (u64)

testing::SaveHook g_hook = nullptr;
void hook(const char* point, int rank) {
  if (g_hook) g_hook(point, rank);
}

std::string errno_text() { return std::strerror(errno); }

void fsync_dir(const std::string& dir, int rank) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0 || ::fsync(fd) != 0)
    fail("checkpoint.save", rank, "fsync of directory " + dir + ": " + errno_text(),
         ErrorCode::internal);
  ::close(fd);
}

// Writes `bytes` to path through a temporary name: write, fsync, rename, fsync the directory.
void write_atomically(const std::string& dir, const std::string& name, const std::string& bytes,
                      int rank) {
  const std::string path = dir + "/" + name, tmp = path + ".tmp" + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) fail("checkpoint.save", rank, "cannot create " + tmp + ": " + errno_text());
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      ::close(fd);
      fail("checkpoint.save", rank, "write to " + tmp + ": " + errno_text(), ErrorCode::internal);
    }
    done += size_t(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0)
    fail("checkpoint.save", rank, "fsync of " + tmp + ": " + errno_text(), ErrorCode::internal);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    fail("checkpoint.save", rank, "rename " + tmp + " -> " + path + ": " + errno_text(),
         ErrorCode::internal);
  fsync_dir(dir, rank);
}

std::string read_file(const std::string& path, int rank, const char* what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("checkpoint.load", rank, std::string(what) + " missing: " + path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string shard_name(int r, int n) {
  return "shard-" + std::to_string(r) + "-of-" + std::to_string(n) + ".bin";
}

std::string shape_text(const std::vector<size_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(shape[i]);
  }
  return s.empty() ? "scalar" : s;
}

std::vector<size_t> parse_shape(const std::string& s) {
  std::vector<size_t> out;
  if (s == "scalar") return out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, 'x')) out.push_back(std::stoull(part));
  return out;
}

}  // namespace

namespace testing {
void set_save_hook(SaveHook h) { g_hook = h; }
}  // namespace testing

void save_checkpoint(Communicator& comm, const FlatLayout& layout, int stage,
                     const ShardState& mine, const std::string& dir) {
  const int rank = comm.rank(), n = comm.size();
  const size_t S = layout.shard_numel();
  if (mine.params.size() != S || mine.m.size() != S || mine.v.size() != S)
    fail("checkpoint.save", rank, "shard arrays do not match the layout's shard size");
  // One fresh directory per save, named by rank 0, so a save never overwrites a complete one.
  std::vector<int64_t> nonce = {
      int64_t(std::chrono::system_clock::now().time_since_epoch().count())};
  comm.broadcast(buffer(nonce), 0).wait();
  char name[64];
  std::snprintf(name, sizeof name, "step-%08lld-%016llx", (long long)mine.step,
                (unsigned long long)nonce[0]);
  const std::string sub = dir + "/" + name;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    fail("checkpoint.save", rank, "cannot create " + dir + ": " + errno_text());
  if (::mkdir(sub.c_str(), 0755) != 0 && errno != EEXIST)
    fail("checkpoint.save", rank, "cannot create " + sub + ": " + errno_text());

  std::string bytes(kHeaderBytes + 3 * S * sizeof(float), '\0');
  uint32_t hdr[4] = {1, uint32_t(rank), uint32_t(n), 0};
  uint64_t count = S;
  std::memcpy(bytes.data(), kMagic, 8);
  std::memcpy(bytes.data() + 8, hdr, sizeof hdr);
  std::memcpy(bytes.data() + 24, &count, 8);
  char* body = bytes.data() + kHeaderBytes;
  std::memcpy(body, mine.params.data(), S * sizeof(float));
  std::memcpy(body + S * sizeof(float), mine.m.data(), S * sizeof(float));
  std::memcpy(body + 2 * S * sizeof(float), mine.v.data(), S * sizeof(float));
  write_atomically(sub, shard_name(rank, n), bytes, rank);
  hook("shard_written", rank);

  std::vector<int64_t> sums = {
      int64_t(fnv1a(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())),
      int64_t(bytes.size())};
  std::vector<int64_t> all(2 * size_t(n));
  comm.all_gather(buffer(sums), buffer(all)).wait();
  if (rank == 0) {
    std::ostringstream m;
    m << "strata-checkpoint 1\nstep " << mine.step << "\nworld_size " << n << "\nstage " << stage
      << "\n";
    for (const TensorSpec& t : layout.tensors())
      m << "tensor " << t.name << " unit " << t.unit << " shape " << shape_text(t.shape) << "\n";
    for (int q = 0; q < n; ++q) {
      char sum[17];
      std::snprintf(sum, sizeof sum, "%016llx", (unsigned long long)all[2 * size_t(q)]);
      m << "shard " << q << " file " << shard_name(q, n) << " bytes " << all[2 * size_t(q) + 1]
        << " fnv1a64 " << sum << "\n";
    }
    m << "end\n";
    write_atomically(sub, "manifest.txt", m.str(), rank);
    hook("manifest_written", rank);
    write_atomically(dir, "LATEST", std::string(name) + "\n", rank);
  }
  comm.barrier().wait();  // returns once the checkpoint is complete everywhere
}

CheckpointReader::CheckpointReader(const std::string& dir, const FlatLayout& layout, int rank)
    : dir_(dir), rank_(rank) {
  std::string latest = read_file(dir + "/LATEST", rank, "checkpoint pointer");
  while (!latest.empty() && (latest.back() == '\n' || latest.back() == ' ')) latest.pop_back();
  path_ = dir + "/" + latest;
  const std::string manifest_path = path_ + "/manifest.txt";
  std::istringstream in(read_file(manifest_path, rank, "manifest"));
  std::string line, word;
  int world = 0;
  bool complete = false;
  std::vector<TensorSpec> tensors;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    l >> word;
    if (word == "strata-checkpoint") {
      int version = 0;
      l >> version;
      if (version != 1)
        fail("unsupported version " + std::to_string(version) + " in " + manifest_path);
    } else if (word == "step") {
      l >> step_;
    } else if (word == "world_size") {
      l >> world;
    } else if (word == "tensor") {
      TensorSpec t;
      std::string k1, k2, shape;
      l >> t.name >> k1 >> t.unit >> k2 >> shape;
      t.shape = parse_shape(shape);
      tensors.push_back(t);
    } else if (word == "shard") {
      int q = -1;
      ShardEntry e;
      std::string k1, k2, k3, sum;
      l >> q >> k1 >> e.file >> k2 >> e.bytes >> k3 >> sum;
      e.checksum = std::stoull(sum, nullptr, 16);
      if (q != int(entries_.size())) fail("shard lines out of order in " + manifest_path);
      entries_.push_back(e);
    } else if (word == "end") {
      complete = true;
    }
  }
  if (!complete || world < 1 || int(entries_.size()) != world)
    fail("incomplete manifest " + manifest_path);
  // The tensors must be the model's, in the same order and shapes (units may be renumbered
  // only by changing the model, which is not a reshard).
  const auto& mine = layout.tensors();
  if (tensors.size() != mine.size())
    fail(manifest_path + " has " + std::to_string(tensors.size()) + " tensors, the model " +
         std::to_string(mine.size()));
  for (size_t t = 0; t < mine.size(); ++t)
    if (tensors[t].name != mine[t].name || tensors[t].shape != mine[t].shape ||
        tensors[t].unit != mine[t].unit)
      fail("tensor " + std::to_string(t) + " is " + tensors[t].name + " " +
           shape_text(tensors[t].shape) + " in " + manifest_path + " but " + mine[t].name + " " +
           shape_text(mine[t].shape) + " in the model");
  saved_ = std::make_unique<FlatLayout>(std::move(tensors), world);
}

void CheckpointReader::fail(const std::string& what) const {
  sharding::fail("checkpoint.load", rank_, what);
}

const std::vector<float>& CheckpointReader::shard(int q) {
  auto it = loaded_.find(q);
  if (it != loaded_.end()) return it->second;
  const ShardEntry& e = entries_[size_t(q)];
  const std::string path = path_ + "/" + e.file;
  const std::string bytes = read_file(path, rank_, "shard file");
  const size_t S = saved_->shard_numel();
  if (bytes.size() != e.bytes || bytes.size() != kHeaderBytes + 3 * S * sizeof(float))
    fail(path + " has " + std::to_string(bytes.size()) + " bytes, the manifest says " +
         std::to_string(e.bytes));
  if (fnv1a(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()) != e.checksum)
    fail("checksum mismatch in " + path);
  if (std::memcmp(bytes.data(), kMagic, 8) != 0) fail(path + " is not a Strata shard file");
  std::vector<float> data(3 * S);
  std::memcpy(data.data(), bytes.data() + kHeaderBytes, data.size() * sizeof(float));
  return loaded_[q] = std::move(data);
}

void CheckpointReader::read(Array a, size_t u, size_t begin, size_t count, float* dst) {
  const size_t real = saved_->unit_real_numel(u), blk = saved_->block_numel(u);
  const size_t S = saved_->shard_numel();
  for (size_t k = 0; k < count; ++k) {
    const size_t i = begin + k;  // unit-local element
    if (i >= real) {
      dst[k] = 0.0f;
      continue;
    }
    // Saved rank q held unit-local elements [q * blk, (q + 1) * blk) at its shard offset.
    const int q = int(i / blk);
    dst[k] = shard(q)[size_t(a) * S + saved_->shard_offset(u) + i % blk];
  }
}

uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace strata::sharding
