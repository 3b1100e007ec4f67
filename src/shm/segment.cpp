#include "shm/segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

#include "bootstrap/await_rank.hpp"
#include "base/log.hpp"

namespace strata::shm {
namespace {

size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }


}  // namespace

Segment::Segment(Store& store, int rank, int size, size_t chunk_bytes, int depth,
                 bool oversubscribed, const ErrorContext& where, std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), chunk_bytes_(round_up(chunk_bytes, 4096)),
      depth_(std::clamp(depth, 1, kMaxDepth)),
      oversubscribed_(oversubscribed) {
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

uint8_t* Segment::buffer(int rank, uint64_t index) {
  return base_ + slot_bytes_ * size_t(rank) + round_up(sizeof(SlotHeader), 4096) +
         chunk_bytes_ * size_t(index % uint64_t(depth_));
}

}  // namespace strata::shm
