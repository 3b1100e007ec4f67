#include "shm/segment.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "base/log.hpp"
#include "bootstrap/await_rank.hpp"

namespace strata::shm {
namespace {

size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// The last-level cache of the CPU this process runs on, as the kernel describes it (what hwloc
// reads too): the instance its cores share, 32 MiB on an EPYC's CCX, where glibc's sysconf
// reports the whole package's (320 MiB). Unknown: 8 MiB, a small server's.
size_t last_level_cache_bytes() {
  const int cpu = std::max(::sched_getcpu(), 0);
  int best_level = 0;
  size_t best = size_t(8) << 20;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cache/index" +
                            std::to_string(i) + "/";
    int level = 0;
    size_t kib = 0;
    char unit = 0;
    FILE* f = std::fopen((dir + "level").c_str(), "r");
    if (!f) break;
    const bool got_level = std::fscanf(f, "%d", &level) == 1;
    std::fclose(f);
    f = std::fopen((dir + "size").c_str(), "r");
    if (!f) continue;
    const bool got_size = std::fscanf(f, "%zu%c", &kib, &unit) == 2 && unit == 'K';
    std::fclose(f);
    if (got_level && got_size && level > best_level) best_level = level, best = kib << 10;
  }
  return best;
}

}  // namespace

Segment::Segment(Store& store, int rank, int size, size_t chunk_bytes, int depth,
                 bool oversubscribed, const ErrorContext& where, std::chrono::milliseconds timeout)
    : rank_(rank),
      size_(size),
      chunk_bytes_(round_up(chunk_bytes, 4096)),
      depth_(std::clamp(depth, 1, kMaxDepth)),
      oversubscribed_(oversubscribed),
      cache_bytes_(last_level_cache_bytes()) {
  ErrorContext w = where;
  w.op = "shm.setup";
  slot_bytes_ = round_up(sizeof(SlotHeader), 4096) + chunk_bytes_ * size_t(depth_);
  total_bytes_ = slot_bytes_ * size_t(size_);
  // Rank 0 makes an anonymous memory file; the others open it through /proc/<pid>/fd/<fd>, which
  // exists only while rank 0 holds the descriptor. No name is ever made, so nothing can be left
  // in /dev/shm, whenever and however any rank dies.
  std::string path;  // as the peers open it
  int fd = -1;
  if (rank == 0) {
    fd = ::memfd_create("strata-shm", MFD_CLOEXEC);
    if (fd >= 0 && ::ftruncate(fd, off_t(total_bytes_)) != 0) {
      ::close(fd);
      fd = -1;
    }
    path = "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fd);
    // Publish even on failure, so the others fail fast with the same reason instead of timing out.
    store.set("shm/path", fd >= 0 ? Bytes(path.begin(), path.end()) : Bytes{});
  } else {
    Bytes b = bootstrap::get_published(store, "shm/path", 0, "its shared segment", w, timeout);
    path.assign(b.begin(), b.end());
    if (!path.empty()) fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  }
  if (fd < 0) {
    const std::string why = path.empty() ? "rank 0 could not create it" : std::strerror(errno);
    ErrorContext at = w;
    at.peer = 0;
    throw Error(ErrorCode::transport, at,
                "cannot create or open the shared segment " + path + " of " +
                    std::to_string(total_bytes_) + " bytes: " + why +
                    " (ranks of one node in different pid namespaces? STRATA_SHM=0 avoids it)");
  }
  void* p = ::mmap(nullptr, total_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  const int map_errno = errno;
  if (rank != 0) ::close(fd);
  if (p == MAP_FAILED) {
    if (rank == 0) ::close(fd);
    throw Error(ErrorCode::transport, w,
                "cannot map the shared segment " + path + ": " + std::strerror(map_errno));
  }
  base_ = static_cast<uint8_t*>(p);
  SlotHeader& mine = header(rank);
  mine.pid_address.store(reinterpret_cast<uint64_t>(&mine.pid), std::memory_order_relaxed);
  mine.pid.store(int32_t(::getpid()), std::memory_order_release);
  store.set("shm/mapped/" + std::to_string(rank), Bytes{1});
  if (rank == 0) {
    // Hold the descriptor until every rank has opened it.
    const auto deadline = Clock::now() + timeout;
    try {
      for (int r = 1; r < size; ++r) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        bootstrap::get_published(store, "shm/mapped/" + std::to_string(r), r,
                                 "that it mapped the shared segment", w,
                                 std::max(left, std::chrono::milliseconds(1)));
      }
    } catch (...) {
      ::close(fd);
      ::munmap(base_, total_bytes_);
      base_ = nullptr;
      throw;
    }
    ::close(fd);
  }
  STRATA_LOG(INFO, "SHM") << "group " << where.group << ": shared segment of "
                          << total_bytes_ / 1024 << " KiB (" << size << " slots x " << depth
                          << " x " << chunk_bytes_ / 1024 << " KiB)";
}

Segment::~Segment() {
  if (base_) ::munmap(base_, total_bytes_);
}

namespace {
// read_process and write_process: `local` is in this process, `remote` in process `pid`.
int copy_process(bool write, int32_t pid, uint8_t* local, uint8_t* remote, size_t bytes) {
  for (size_t done = 0; done < bytes;) {  // the kernel may copy less than asked
    iovec l{local + done, bytes - done}, r{remote + done, bytes - done};
    const ssize_t got = write ? ::process_vm_writev(pid, &l, 1, &r, 1, 0)
                              : ::process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return got < 0 ? errno : EFAULT;
    done += size_t(got);
  }
  return 0;
}
}  // namespace

int read_process(int32_t pid, void* to, const void* from, size_t bytes) {
  return copy_process(false, pid, static_cast<uint8_t*>(to),
                      const_cast<uint8_t*>(static_cast<const uint8_t*>(from)), bytes);
}

int write_process(int32_t pid, void* to, const void* from, size_t bytes) {
  return copy_process(true, pid, const_cast<uint8_t*>(static_cast<const uint8_t*>(from)),
                      static_cast<uint8_t*>(to), bytes);
}

bool Segment::single_copy_possible() {
  if (single_copy_ != Settled::unknown) return single_copy_ == Settled::yes;
  constexpr uint32_t kUnknown = 0, kYes = 1, kNo = 2;
  SlotHeader& mine = header(rank_);
  if (mine.copies_peers.load(std::memory_order_relaxed) == kUnknown) {
    bool all = true;
    for (int j = 0; j < size_ && all; ++j) {
      if (j == rank_) continue;
      const int32_t pid = header(j).pid.load(std::memory_order_acquire);
      if (pid == 0) return false;  // not mapped yet: try again at a later call
      int32_t read = 0;
      const auto* at =
          reinterpret_cast<const void*>(header(j).pid_address.load(std::memory_order_relaxed));
      // Balanced all-to-allv writes too, and a seccomp filter may allow one and not the other:
      // the write puts back the value just read, so it changes nothing.
      all = read_process(pid, &read, at, sizeof read) == 0 && read == pid &&
            write_process(pid, const_cast<void*>(at), &read, sizeof read) == 0;
    }
    mine.copies_peers.store(all ? kYes : kNo, std::memory_order_release);
    STRATA_LOG(INFO, "SHM") << "rank " << rank_ << (all ? " may" : " may not")
                            << " read and write its peers' memory: single copy "
                            << (all ? "offered" : "not offered");
  }
  for (int j = 0; j < size_; ++j) {
    const uint32_t v = header(j).copies_peers.load(std::memory_order_acquire);
    if (v == kUnknown) return false;
    if (v == kNo) {
      single_copy_ = Settled::no;
      return false;
    }
  }
  single_copy_ = Settled::yes;
  return true;
}

uint8_t* Segment::buffer(int rank, uint64_t index) {
  return base_ + slot_bytes_ * size_t(rank) + round_up(sizeof(SlotHeader), 4096) +
         chunk_bytes_ * size_t(index % uint64_t(depth_));
}

}  // namespace strata::shm
