// The store server's state: one thread polling non-blocking sockets. Its work is split by
// concern: the poll loop and lifecycle (tcp_store_server.cpp), the connections, their limits and
// their bytes (server_connections.cpp), and the requests on them (server_requests.cpp).
#pragma once

#include <poll.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "store/refusal_log.hpp"
#include "store/wire.hpp"
#include "strata/store.hpp"

namespace strata {
namespace store {

constexpr auto kHelloDeadline = std::chrono::seconds(10);
constexpr size_t kMaxUnauthenticated = 1024;
constexpr size_t kMaxUnauthenticatedPerSource = 256;
constexpr size_t kReservedFds = 64;  // for the rest of the process (its transports, its files)
constexpr size_t kReadChunk = size_t(256) << 10;
constexpr size_t kReadPerRound = size_t(4) << 20;  // per connection and poll round: fairness
constexpr size_t kKeepCapacity = size_t(1) << 20;  // larger idle buffers are given back
constexpr uint32_t kNoTimeout = UINT32_MAX;        // a GET or WAIT that waits for ever

/// One client connection, as the server thread sees it.
struct ServerConnection {
  int fd = -1;
  std::string peer;     // "a.b.c.d:port"
  uint32_t source = 0;  // the peer's IPv4 address: the unit of the per-source limit
  Clock::time_point accepted;
  bool authenticated = false;
  bool closed = false;              // closed by the server; the fd is released after the round
  std::vector<uint8_t> in;          // received bytes not yet parsed
  std::vector<uint8_t> out;         // encoded replies
  size_t out_sent = 0;              // bytes of `out` already sent
  std::optional<Message> deferred;  // a GET or WAIT whose keys are not all there yet
  Clock::time_point deferred_until = Clock::time_point::max();
  std::vector<std::pair<std::string, std::vector<uint8_t>>> wills;  // SET when it closes

  bool replying() const { return out_sent < out.size(); }
  bool blocked() const { return deferred.has_value() || replying(); }
};

/// How many connections the server may hold: the file descriptors the process may open, less a
/// reserve, and a quarter of them at most unauthenticated.
size_t fd_budget();

}  // namespace store

using store::Message;
using store::ServerConnection;
using store::Type;

class TcpStoreServer::Impl {
 public:
  explicit Impl(const TcpStoreOptions& options);
  ~Impl();
  uint16_t port() const { return port_; }
  uint64_t rejected() const { return rejected_.load(); }
  size_t open() const { return open_.load(); }
  size_t keys() const { return keys_.load(std::memory_order_relaxed); }
  void set_on_counter(std::function<void(const std::string&, int64_t)> f) {
    std::lock_guard<std::mutex> lock(on_counter_mu_);
    on_counter_ = std::move(f);
  }

 private:
  void run();
  void round();
  int poll_timeout_ms(Clock::time_point now) const;
  void accept_new();
  void service(ServerConnection& c, short revents);
  void service_or_reject(ServerConnection& c, short revents);  // an exception rejects c only
  bool read_some(ServerConnection& c);  // false: the peer closed or the socket failed
  void pump(ServerConnection& c);       // send what is queued, then handle the next frames
  bool flush(ServerConnection& c);
  void hello(ServerConnection& c, const Message& m);
  void handle(ServerConnection& c, Message m);
  bool try_answer(ServerConnection& c, const Message& m);
  void answer_deferred();
  void reply(ServerConnection& c, const Message& m);
  void reply_error(ServerConnection& c, const std::string& text);
  bool make_room(uint32_t source, const std::string& peer);  // false: refuse the newcomer
  void reject(ServerConnection& c, store::Refusal cause, const std::string& why);
  // reject(), first sending `why` as an ERROR reply: for a client of this store that is wrong
  // for it (token, protocol version), so that it fails at once instead of retrying.
  void reject_saying(ServerConnection& c, store::Refusal cause, const std::string& why);
  void drop(ServerConnection& c);
  void close(ServerConnection& c);  // marks it closed and makes its WILLs come true
  void forget_unauthenticated(const ServerConnection& c);  // it authenticated or closed
  void expire(Clock::time_point now);
  void sweep();

  std::string token_;
  uint16_t port_ = 0;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: the destructor wakes poll() through it
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<size_t> open_{0};  // conns_.size(), for other threads
  std::atomic<size_t> keys_{0};  // data_.size(), for other threads
  std::mutex on_counter_mu_;     // guards on_counter_, set from another thread
  std::function<void(const std::string&, int64_t)> on_counter_;
  const size_t max_connections_ = store::fd_budget();
  const size_t max_unauthenticated_ = std::min(store::kMaxUnauthenticated, max_connections_ / 4);

  // Owned by the server thread.
  std::vector<std::unique_ptr<ServerConnection>> conns_;
  std::unordered_map<uint32_t, size_t> unauthenticated_;  // open ones, per source
  size_t unauthenticated_total_ = 0;
  store::RefusalLog refusals_;
  std::unordered_map<std::string, std::vector<uint8_t>> data_;
  bool data_changed_ = false;                // parked requests may now be answerable
  Clock::time_point accept_paused_until_{};  // out of file descriptors: back off
  Clock::time_point last_accept_warning_{};
  std::vector<uint8_t> scratch_ = std::vector<uint8_t>(store::kReadChunk);
  std::vector<pollfd> fds_;
  std::thread thread_;
};

}  // namespace strata
