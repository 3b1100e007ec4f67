// Symmetric buffers on the shared-memory path: memory each rank of a group on one node
// allocates together (Communicator::alloc_symmetric), every rank mapping every other's part. A
// collective whose input lies in one needs no staging copy: the writer stamps "my window W at
// offset X" (Stamp::source) and the readers load the bytes from where they lie, one copy in
// all instead of two, as NCCL's registered windows and torch's symmetric memory let a kernel
// read a peer's buffer. The writer returns once every reader has consumed it.
//
// Each part is an anonymous memory file (memfd) that the peers open through its owner's /proc
// entry, as the segment is (segment.hpp): nothing is left in /dev/shm whatever happens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "strata/error.hpp"

namespace strata::shm {

/// A stamp packs a window's number in 24 bits beside a 40-bit offset (Stamp::source): the most
/// windows a group makes, and the most bytes of one.
constexpr uint32_t kMaxWindows = (uint32_t(1) << 24) - 1;
constexpr size_t kMaxWindowBytes = size_t(1) << 40;

/// One symmetric allocation as this rank sees it: its own part, and every peer's mapped here.
class Window {
 public:
  /// This rank's part: `bytes` (0 is allowed) of a new memory file, mapped.
  Window(uint32_t id, int rank, int size, size_t bytes, const ErrorContext& where);
  ~Window();
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  /// Where a peer opens this rank's part (/proc/<pid>/fd/<fd>; valid while this Window lives).
  std::string path() const;
  /// Maps `rank`'s part, opened at `path`; throws (transport, naming the rank) when it cannot.
  void map_peer(int rank, const std::string& path, const ErrorContext& where);

  uint32_t id() const { return id_; }
  size_t bytes() const { return bytes_; }
  uint8_t* mine() const { return parts_[size_t(rank_)]; }
  /// `rank`'s part as mapped here (nullptr before map_peer).
  const uint8_t* part(int rank) const { return parts_[size_t(rank)]; }

 private:
  uint32_t id_;
  int rank_;
  size_t bytes_;
  size_t mapped_;  // bytes of each mapping: at least a page, mmap takes no empty range
  int fd_ = -1;
  std::vector<uint8_t*> parts_;
};

/// A group's live windows, looked up by a collective's executing thread while the user's
/// thread adds them; a window leaves when its last holder drops it.
class Windows {
 public:
  struct Found {
    uint32_t id = 0;    ///< 0: not in a window
    size_t offset = 0;  ///< of the range's first byte in the window
  };
  void add(const std::shared_ptr<Window>& w);
  /// The window of this rank holding all of [p, p + bytes), if one does.
  Found find(const void* p, size_t bytes) const;
  /// Window `id`, or nullptr when this rank holds it no longer (or never did).
  std::shared_ptr<Window> get(uint32_t id) const;

 private:
  mutable std::mutex mu_;
  std::vector<std::weak_ptr<Window>> live_;
};

}  // namespace strata::shm
