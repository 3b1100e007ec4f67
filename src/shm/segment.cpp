#include "shm/segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "log.hpp"

namespace strata::shm {
namespace {

std::string unique_name() {
  std::ifstream f("/dev/urandom", std::ios::binary);
  uint64_t r = 0;
  f.read(reinterpret_cast<char*>(&r), sizeof r);
  return "/strata-" + std::to_string(::getpid()) + "-" + std::to_string(r);
}

size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }


}  // namespace

Segment::Segment(Store& store, int rank, int size, size_t chunk_bytes, int depth,
                 bool oversubscribed, const ErrorContext& where, std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), chunk_bytes_(round_up(chunk_bytes, 4096)), depth_(depth),
      oversubscribed_(oversubscribed) {
  ErrorContext w = where;
  w.op = "shm.setup";
  slot_bytes_ = round_up(sizeof(SlotHeader), 4096) + chunk_bytes_ * size_t(depth_);
  total_bytes_ = slot_bytes_ * size_t(size_);
  std::string name;
  int fd = -1;
  if (rank == 0) {
    name = unique_name();
    fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0 && ::ftruncate(fd, off_t(total_bytes_)) != 0) {
      ::close(fd);
      ::shm_unlink(name.c_str());
      fd = -1;
    }
    // Publish even on failure, so the others fail fast with the same reason instead of timing out.
    store.set("shm/name", fd >= 0 ? Bytes(name.begin(), name.end()) : Bytes{});
  } else {
    Bytes b = store.get("shm/name", timeout);
    name.assign(b.begin(), b.end());
    if (!name.empty()) fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  }
  if (fd < 0) {
    throw Error(ErrorCode::transport, w,
                "cannot create or open shared memory segment " + name + " of " +
                    std::to_string(total_bytes_) + " bytes: " + std::strerror(errno));
  }
  void* p = ::mmap(nullptr, total_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    throw Error(ErrorCode::transport, w, "cannot map shared memory " + name + ": " + std::strerror(errno));
  }
  base_ = static_cast<uint8_t*>(p);
  // Once everyone has mapped it the name is no longer needed: unlink so nothing can leak.
  store.set("shm/mapped/" + std::to_string(rank), Bytes{1});
  if (rank == 0) {
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) keys.push_back("shm/mapped/" + std::to_string(r));
    try {
      store.wait(keys, timeout);
    } catch (...) {
      ::shm_unlink(name.c_str());
      throw;
    }
    ::shm_unlink(name.c_str());
  }
  STRATA_LOG(INFO, "SHM") << "group " << where.group << ": shared segment of "
                          << total_bytes_ / 1024 << " KiB (" << size << " slots x " << depth
                          << " x " << chunk_bytes_ / 1024 << " KiB)";
}

Segment::~Segment() {
  if (base_) ::munmap(base_, total_bytes_);
}

SlotHeader& Segment::header(int rank) {
  return *reinterpret_cast<SlotHeader*>(base_ + slot_bytes_ * size_t(rank));
}

uint8_t* Segment::buffer(int rank, uint64_t index) {
  return base_ + slot_bytes_ * size_t(rank) + round_up(sizeof(SlotHeader), 4096) +
         chunk_bytes_ * size_t(index % uint64_t(depth_));
}

}  // namespace strata::shm
