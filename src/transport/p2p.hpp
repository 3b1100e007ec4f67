// What a collective algorithm sees of the transport: tagged, non-blocking point-to-point messages
// between the ranks of one group, plus scratch memory. Algorithms never know which transport runs
// underneath (UCX, NCCL, shared memory); transports never know which algorithm runs on them.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace strata::transport {

/// One posted send or receive. Filled by the transport; algorithms only pass it back to wait().
struct Request {
  void* handle = nullptr;  ///< transport's request; nullptr once complete
  int peer = -1;
  size_t bytes = 0;  ///< expected size (receives must get exactly this many bytes)
  bool is_recv = false;
};

class P2P {
 public:
  virtual ~P2P() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Posts a message to `peer`. `step` distinguishes messages within one operation; messages
  /// between one pair with one step match in the order they were posted.
  virtual Request isend(int peer, const void* data, size_t bytes, uint32_t step) = 0;
  virtual Request irecv(int peer, void* data, size_t bytes, uint32_t step) = 0;
  /// Completes every request, or throws strata::Error naming the peer (timeout, size mismatch,
  /// transport failure). Outstanding requests are cancelled before it throws.
  virtual void wait(std::span<Request> requests) = 0;
  /// Reusable scratch memory of at least `bytes`, one region per `slot` (0..3), valid until the
  /// next call with the same slot. Not the transport's to provide: every P2P has it. Never null,
  /// also for 0 bytes (a copy of 0 bytes to null is still undefined).
  void* scratch(size_t bytes, int slot) {
    auto& s = scratch_[size_t(slot)];
    if (!s.data || s.bytes < bytes) {
      s = {std::make_unique_for_overwrite<uint8_t[]>(std::max<size_t>(bytes, 1)), bytes};
    }
    return s.data.get();
  }

 private:
  struct Scratch {
    std::unique_ptr<uint8_t[]> data;
    size_t bytes = 0;
  };
  std::array<Scratch, 4> scratch_;
};

/// Sends to `to` and receives from `from` at once (the building block of ring algorithms).
inline void sendrecv(P2P& p, int to, const void* sbuf, size_t sbytes, int from, void* rbuf,
                     size_t rbytes, uint32_t step) {
  Request r[2] = {p.irecv(from, rbuf, rbytes, step), p.isend(to, sbuf, sbytes, step)};
  p.wait(r);
}

}  // namespace strata::transport
