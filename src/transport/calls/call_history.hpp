// The calls a rank made last, by sequence number, and the question ranks ask each other about
// them. The messages of two calls need not meet (a differing root, an all-gather against an
// all-reduce): a rank whose wait has blocked for a second asks the peer it waits on what it
// called at this sequence number, and a rank that finds a message of a call it has finished,
// which nobody took, asks its sender; an answer that differs is a mismatch, named whole
// (docs/architecture.md, "Mismatches").
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "transport/calls/call_bits.hpp"

namespace strata::transport {

/// What a rank asks a peer: its call at sequence number `seq`.
struct CallQuery {
  uint64_t seq = 0;
};

/// The peer's reply: its call at `seq` when it still knows it (`known`), and the latest
/// sequence number it began (`began` = 0: none yet).
struct CallAnswer {
  uint64_t seq = 0;
  uint64_t latest = 0;
  int32_t began = 0;
  int32_t known = 0;
  Call call;
};

class CallHistory {
 public:
  /// The last kDepth calls are remembered: enough for a peer a few calls ahead or behind.
  static constexpr uint64_t kDepth = 16;

  void began(uint64_t seq, const Call& c) {
    calls_[seq % kDepth] = {seq, c};
    latest_ = seq;
    began_ = true;
  }
  /// This rank's call at `seq`, if it began it and still remembers it.
  std::optional<Call> at(uint64_t seq) const {
    const auto& e = calls_[seq % kDepth];
    if (!began_ || e.seq != seq || seq > latest_) return std::nullopt;
    return e.call;
  }
  CallAnswer answer(const CallQuery& q) const {
    CallAnswer a;
    a.seq = q.seq;
    a.latest = latest_;
    a.began = began_;
    if (const auto c = at(q.seq)) {
      a.known = 1;
      a.call = *c;
    }
    return a;
  }
  bool empty() const { return !began_; }
  uint64_t latest() const { return latest_; }

 private:
  struct Entry {
    uint64_t seq = ~uint64_t(0);
    Call call;
  };
  std::array<Entry, kDepth> calls_{};
  uint64_t latest_ = 0;
  bool began_ = false;
};

}  // namespace strata::transport
