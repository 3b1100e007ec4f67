#include "transport/solo/solo.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "transport/solo/factory.hpp"

namespace strata::solo {

Solo::Solo()
    : wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      quiet_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (wake_fd_ < 0 || quiet_fd_ < 0) {
    if (wake_fd_ >= 0) ::close(wake_fd_);
    if (quiet_fd_ >= 0) ::close(quiet_fd_);
    throw Error(ErrorCode::transport, {.op = "init"},
                "eventfd for a group of one: " + std::string(std::strerror(errno)));
  }
}

Solo::~Solo() {
  ::close(wake_fd_);
  ::close(quiet_fd_);
}

void Solo::check_peer(int peer, const char* what) const {
  if (peer != 0) {
    ErrorContext w = where_;
    w.peer = peer;
    throw Error(
        ErrorCode::invalid_argument, w,
        std::string(what) + " peer " + std::to_string(peer) + ": the group has one rank, 0");
  }
}

void Solo::begin(uint64_t seq, const ErrorContext& where, Clock::time_point) {
  seq_ = seq;
  where_ = where;
  // What an earlier collective left (it threw between a post and its match) can never match
  // now; a receive of it would write into a buffer its caller freed.
  std::erase_if(unexpected_, [&](const Message& m) { return m.key.collective; });
  std::erase_if(posted_, [&](const Receive& r) { return r.key.collective; });
}

transport::Request Solo::isend(int peer, const void* data, size_t bytes, uint32_t step) {
  return send({true, seq_, step}, peer, data, bytes);
}

transport::Request Solo::irecv(int peer, void* data, size_t bytes, uint32_t step) {
  return receive({true, seq_, step}, peer, data, bytes);
}

transport::Request Solo::post_send(int peer, const void* data, size_t bytes, uint32_t tag) {
  return send({false, 0, tag}, peer, data, bytes);
}

transport::Request Solo::post_recv(int peer, void* data, size_t bytes, uint32_t tag) {
  return receive({false, 0, tag}, peer < 0 ? 0 : peer, data, bytes);  // any source: this rank
}

transport::Request Solo::send(Key key, int peer, const void* data, size_t bytes) {
  check_peer(peer, "send to");
  transport::Request r{nullptr, peer, bytes, false};
  auto it = std::find_if(posted_.begin(), posted_.end(),
                         [&](const Receive& p) { return !p.done && p.key == key; });
  const auto* in = static_cast<const uint8_t*>(data);
  if (it != posted_.end()) {
    deliver(*it, in, bytes);
  } else {
    unexpected_.push_back({key, std::vector<uint8_t>(in, in + bytes)});
  }
  return r;  // complete: the bytes were copied
}

transport::Request Solo::receive(Key key, int peer, void* data, size_t bytes) {
  check_peer(peer, "receive from");
  Receive& r = posted_.emplace_back(Receive{key, data, bytes});
  auto it = std::find_if(unexpected_.begin(), unexpected_.end(),
                         [&](const Message& m) { return m.key == key; });
  if (it != unexpected_.end()) {
    deliver(r, it->data.data(), it->data.size());
    unexpected_.erase(it);
  }
  return {&r, peer, bytes, true};
}

void Solo::deliver(Receive& r, const uint8_t* data, size_t bytes) {
  if (bytes == r.bytes && bytes > 0) std::memcpy(r.data, data, bytes);  // else test() refuses it
  r.got = bytes;
  r.done = true;
}

bool Solo::test(transport::Request& r, const ErrorContext& where) {
  if (!r.handle) return true;
  auto it = std::find_if(posted_.begin(), posted_.end(),
                         [&](const Receive& p) { return &p == r.handle; });
  if (it == posted_.end()) {
    throw Error(ErrorCode::internal, where, "a receive this transport no longer holds");
  }
  if (!it->done) return false;
  const size_t got = it->got;
  posted_.erase(it);
  r.handle = nullptr;
  if (got != r.bytes) {
    ErrorContext w = where;
    w.peer = r.peer;
    throw Error(ErrorCode::invalid_argument, w,
                "size mismatch: expected " + std::to_string(r.bytes) + " bytes, this rank sent " +
                    std::to_string(got) + " to itself (does it pass the same counts and dtypes?)");
  }
  return true;
}

void Solo::wait(std::span<transport::Request> requests) {
  for (auto& r : requests) {
    if (test(r, where_)) continue;
    for (auto& q : requests) cancel(q);
    ErrorContext w = where_;
    w.peer = r.peer;
    // Nothing else can send it: a collective's algorithm waited before its own send.
    throw Error(ErrorCode::internal, w,
                "a receive of " + std::to_string(r.bytes) +
                    " bytes from this rank itself, which sent none first (a group of one)");
  }
}

void Solo::cancel(transport::Request& r) {
  if (!r.handle) return;
  std::erase_if(posted_, [&](const Receive& p) { return &p == r.handle; });
  r.handle = nullptr;
}

void Solo::wait_event(Clock::time_point until) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
  pollfd p{wake_fd_, POLLIN, 0};
  if (::poll(&p, 1, int(std::clamp<int64_t>(left.count() + 1, 0, 100))) > 0) {
    uint64_t v;
    ssize_t ignored = ::read(wake_fd_, &v, sizeof v);
    (void)ignored;
  }
}

void Solo::wake() {
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
  (void)ignored;
}

std::unique_ptr<transport::Transport> make_transport() { return std::make_unique<Solo>(); }

}  // namespace strata::solo
