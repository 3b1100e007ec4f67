// The transport of a group of one rank: its messages go to itself, so no network is needed. A
// UCX worker there would cost shared-memory segments, zeroed page by page, and file descriptors
// for nothing (a 4-rank trainer test made 2720 groups of one among its 4868). Sends are buffered
// (they complete at once, as UCX's small ones do); receives match sends of the same key in the
// order they were posted.
#pragma once

#include <cstdint>
#include <list>
#include <vector>

#include "transport/transport.hpp"

namespace strata::solo {

class Solo final : public transport::Transport {
 public:
  Solo();
  ~Solo() override;

  int rank() const override { return 0; }
  int size() const override { return 1; }
  transport::Request isend(int peer, const void* data, size_t bytes, uint32_t step) override;
  transport::Request irecv(int peer, void* data, size_t bytes, uint32_t step) override;
  /// Every request must complete without waiting: its sender is this thread, and past.
  void wait(std::span<transport::Request> requests) override;

  void begin(uint64_t seq, const ErrorContext& where, Clock::time_point deadline) override;
  transport::Request post_send(int peer, const void* data, size_t bytes, uint32_t tag) override;
  transport::Request post_recv(int peer, void* data, size_t bytes, uint32_t tag) override;
  bool test(transport::Request& r, const ErrorContext& where) override;
  void cancel(transport::Request& r) override;

  bool progress() override { return false; }  // messages match when posted
  bool arm() override { return true; }
  void wait_event(Clock::time_point until) override;
  void wake() override;
  int event_fd() const override { return quiet_fd_; }
  void set_oversubscribed(bool v) override { oversubscribed_ = v; }
  bool oversubscribed() const override { return oversubscribed_; }
  void set_watchdog(transport::Watchdog*) override {}  // no peer to die

  std::optional<transport::Notice> poll_failure() override { return std::nullopt; }
  void send_notice(const transport::Notice&) override {}      // no peer to tell
  transport::CallCheck* calls() override { return nullptr; }  // no peer to disagree with

 private:
  /// What matches a send to a receive: a collective's message (its sequence number and step)
  /// or a user message (its tag).
  struct Key {
    bool collective;
    uint64_t seq;
    uint32_t id;
    bool operator==(const Key&) const = default;
  };
  struct Message {
    Key key;
    std::vector<uint8_t> data;
  };
  struct Receive {
    Key key;
    void* data;
    size_t bytes;
    bool done = false;
    size_t got = 0;
  };
  transport::Request send(Key key, int peer, const void* data, size_t bytes);
  transport::Request receive(Key key, int peer, void* data, size_t bytes);
  void deliver(Receive& r, const uint8_t* data, size_t bytes);
  void check_peer(int peer, const char* what) const;

  uint64_t seq_ = 0;
  ErrorContext where_;
  bool oversubscribed_ = false;
  std::list<Message> unexpected_;  // sent, not yet received, in order
  std::list<Receive> posted_;      // receives posted, in order (a request holds its address)
  int wake_fd_ = -1;               // wake()
  int quiet_fd_ = -1;              // event_fd(): never readable, nothing arrives from a network
};

}  // namespace strata::solo
