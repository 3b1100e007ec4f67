// The store server: one thread polling non-blocking sockets. Each connection has its own input
// and output buffers, so a slow, silent or half-finished client never holds up the others. GET
// and WAIT are parked on their connection and answered when a SET or ADD supplies their keys, or
// with TIMEOUT when their time is up. Anything malformed or unauthenticated closes that one
// connection; refusals are logged once per cause and counted (store/refusal_log.hpp).
//
// Each connection is strictly request/reply: the next frame is parsed only once the previous
// reply has been sent. That bounds what one client can make the server hold to one input frame
// and one reply, however it misbehaves.
//
// A flood of connections must not crowd out the job's own clients, which authenticate with their
// first frame. So unauthenticated connections are limited, per source address and in all, and a
// new one over a limit evicts the oldest unauthenticated one (of its source, or of the source
// holding the most): a held connection gains an attacker nothing, and a client that says HELLO
// at once is never the oldest. Authenticated connections are never evicted; they are limited
// only by the process's file descriptors.
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>

#include "base/log.hpp"
#include "store/refusal_log.hpp"
#include "store/wire.hpp"
#include "strata/error.hpp"
#include "strata/store.hpp"

namespace strata {
namespace store {
namespace {

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
size_t fd_budget() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 1 << 20;
  return r.rlim_cur > 4 * kReservedFds ? size_t(r.rlim_cur) - kReservedFds : size_t(r.rlim_cur) / 2;
}

/// Counters are stored as decimal text, so GET shows them readably and SET can seed one.
std::optional<int64_t> parse_counter(const std::vector<uint8_t>& v) {
  const char* b = reinterpret_cast<const char*>(v.data());
  int64_t x = 0;
  auto [end, ec] = std::from_chars(b, b + v.size(), x);
  if (v.empty() || ec != std::errc() || end != b + v.size()) return std::nullopt;
  return x;
}

ErrorContext at(const char* op) {
  ErrorContext c;
  c.op = op;
  return c;
}

}  // namespace
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

 private:
  void run();
  void round();
  int poll_timeout_ms(Clock::time_point now) const;
  void accept_new();
  void service(ServerConnection& c, short revents);
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

TcpStoreServer::Impl::Impl(const TcpStoreOptions& o) : token_(o.token) {
  sockaddr_in a{};
  std::string why;
  if (!store::resolve_ipv4(o.host, o.port, /*passive=*/true, a, why)) {
    throw Error(ErrorCode::invalid_argument, store::at("store.listen"),
                "cannot resolve the store's host '" + o.host + "': " + why);
  }
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) {
    throw Error(ErrorCode::transport, store::at("store.listen"),
                std::string("cannot create a socket: ") + std::strerror(errno));
  }
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // restart after a crash
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listen_fd_, SOMAXCONN) != 0) {
    const int e = errno;
    ::close(listen_fd_);
    throw Error(ErrorCode::transport, store::at("store.listen"),
                "cannot listen on " + store::address_string(a) + ": " + std::strerror(e));
  }
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    const int e = errno;
    ::close(listen_fd_);
    throw Error(ErrorCode::transport, store::at("store.listen"),
                std::string("cannot create an eventfd: ") + std::strerror(e));
  }
  STRATA_LOG(INFO, "STORE") << "serving on " << store::address_string(a);
  thread_ = std::thread([this] { run(); });
}

TcpStoreServer::Impl::~Impl() {
  stop_.store(true);
  const uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
  (void)ignored;
  thread_.join();
  refusals_.summarize(Clock::now(), /*now_or_never=*/true);
  for (auto& c : conns_) ::close(c->fd);
  ::close(listen_fd_);
  ::close(wake_fd_);
}

void TcpStoreServer::Impl::run() {
  while (!stop_.load()) {
    try {
      round();
    } catch (const std::exception& e) {  // e.g. bad_alloc: keep serving the others
      STRATA_LOG(WARN, "STORE") << "server loop: " << e.what();
    }
  }
}

// One poll() and everything it reported.
void TcpStoreServer::Impl::round() {
  const auto now = Clock::now();
  fds_.clear();
  fds_.push_back({wake_fd_, POLLIN, 0});
  // A negative fd is skipped by poll(): that is how accepting pauses.
  fds_.push_back({now >= accept_paused_until_ ? listen_fd_ : -1, POLLIN, 0});
  const size_t polled = conns_.size();
  for (const auto& c : conns_) {
    fds_.push_back({c->fd, short(POLLIN | (c->replying() ? POLLOUT : 0)), 0});
  }
  if (::poll(fds_.data(), fds_.size(), poll_timeout_ms(now)) < 0) {
    if (errno != EINTR) {
      STRATA_LOG(WARN, "STORE") << "poll failed: " << std::strerror(errno);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return;
  }
  if (fds_[0].revents != 0) {
    uint64_t v;
    ssize_t ignored = ::read(wake_fd_, &v, sizeof v);
    (void)ignored;
    if (stop_.load()) return;
  }
  // Connections accepted now are appended, after the ones `fds_` describes.
  if (fds_[1].revents != 0) accept_new();
  for (size_t i = 0; i < polled; ++i) {
    const short ev = fds_[i + 2].revents;
    if (ev == 0 || conns_[i]->closed) continue;
    try {
      service(*conns_[i], ev);
    } catch (const std::exception& e) {
      reject(*conns_[i], store::Refusal::internal, std::string("internal error: ") + e.what());
    }
  }
  answer_deferred();
  expire(Clock::now());
  answer_deferred();  // the WILLs of connections that expired
  sweep();
}

int TcpStoreServer::Impl::poll_timeout_ms(Clock::time_point now) const {
  auto next = now + std::chrono::seconds(1);  // an upper bound; nothing depends on it
  if (accept_paused_until_ > now) next = std::min(next, accept_paused_until_);
  for (const auto& c : conns_) {
    if (!c->authenticated) next = std::min(next, c->accepted + store::kHelloDeadline);
    next = std::min(next, c->deferred_until);
  }
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
  return int(std::max<int64_t>(ms, 0));
}

void TcpStoreServer::Impl::accept_new() {
  for (int i = 0; i < 256; ++i) {  // bounded, so a connect storm cannot starve the clients
    sockaddr_in a{};
    socklen_t len = sizeof a;
    const int fd =
        ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // The pending connection stays readable: without a pause poll() would spin.
        const auto now = Clock::now();
        accept_paused_until_ = now + std::chrono::milliseconds(100);
        if (now - last_accept_warning_ > std::chrono::seconds(10)) {
          last_accept_warning_ = now;
          STRATA_LOG(WARN, "STORE") << "cannot accept connections: " << std::strerror(errno);
        }
      }
      return;
    }
    const std::string peer = store::address_string(a);
    if (!make_room(a.sin_addr.s_addr, peer)) {
      refusals_.refused(store::Refusal::full, peer,
                        "already " + std::to_string(conns_.size()) + " open connections");
      ++rejected_;
      ::close(fd);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // small replies go out now
    auto c = std::make_unique<ServerConnection>();
    c->fd = fd;
    c->peer = peer;
    c->source = a.sin_addr.s_addr;
    c->accepted = Clock::now();
    ++unauthenticated_[c->source];
    ++unauthenticated_total_;
    conns_.push_back(std::move(c));
    open_ = conns_.size();
    // A client's HELLO usually follows its connect at once: take it now, so that it is
    // authenticated before a flood of newer connections could make it the oldest.
    try {
      service(*conns_.back(), POLLIN);
    } catch (const std::exception& e) {
      reject(*conns_.back(), store::Refusal::internal, std::string("internal error: ") + e.what());
    }
  }
}

bool TcpStoreServer::Impl::make_room(uint32_t source, const std::string& peer) {
  // The source to evict from: this one when it is over its own limit, else the largest when all
  // unauthenticated connections together are; nothing to evict otherwise.
  std::optional<uint32_t> from;
  const auto mine = unauthenticated_.find(source);
  if (mine != unauthenticated_.end() && mine->second >= store::kMaxUnauthenticatedPerSource) {
    from = source;
  } else if (unauthenticated_total_ >= max_unauthenticated_ || conns_.size() >= max_connections_) {
    size_t most = 0;
    for (const auto& [s, n] : unauthenticated_) {
      if (n > most) most = n, from = s;
    }
  }
  if (!from) return conns_.size() < max_connections_;
  for (auto& c : conns_) {  // accepted in order: the first found is the oldest
    if (!c->closed && !c->authenticated && c->source == *from) {
      reject(*c, store::Refusal::crowded_out,
             "unauthenticated for " +
                 std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() -
                                                                                      c->accepted)
                                    .count()) +
                 " ms when " + peer + " connected over the limit of " +
                 std::to_string(*from == source ? store::kMaxUnauthenticatedPerSource
                                                : max_unauthenticated_) +
                 " unauthenticated connections");
      return true;
    }
  }
  return conns_.size() < max_connections_;
}

void TcpStoreServer::Impl::service(ServerConnection& c, short revents) {
  bool open = true;
  if (revents & (POLLIN | POLLHUP | POLLERR)) open = read_some(c);
  pump(c);
  if (open || c.closed) return;
  // The peer has gone. Bytes left over while nothing blocked them are a frame cut short.
  if (!c.blocked() && !c.in.empty()) {
    reject(c, store::Refusal::cut_short,
           "closed the connection in the middle of a frame (" + std::to_string(c.in.size()) +
               " bytes of it received)");
  } else {
    drop(c);
  }
}

bool TcpStoreServer::Impl::read_some(ServerConnection& c) {
  // Nothing is parsed while a request is parked or a reply is going out, so a full buffer here
  // means the peer keeps sending without waiting for replies.
  const size_t cap = store::kHeaderBytes + store::max_payload(Type::set);
  if (c.in.size() >= cap) {
    reject(c, store::Refusal::flooding, "kept sending while its request was pending");
    return true;
  }
  size_t budget = store::kReadPerRound;
  while (budget > 0 && c.in.size() < cap) {
    const size_t want = std::min({scratch_.size(), budget, cap - c.in.size()});
    const ssize_t n = ::recv(c.fd, scratch_.data(), want, 0);
    if (n > 0) {
      c.in.insert(c.in.end(), scratch_.data(), scratch_.data() + n);
      budget -= size_t(n);
      if (size_t(n) < want) break;  // drained for now
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return false;  // 0: orderly close; otherwise a reset or other failure
  }
  return true;
}

void TcpStoreServer::Impl::pump(ServerConnection& c) {
  while (!c.closed) {
    if (!flush(c) || c.blocked()) return;
    if (c.in.size() < store::kHeaderBytes) break;
    std::string why;
    auto h = store::parse_header(c.in.data(), why);
    if (!h) return reject(c, store::Refusal::malformed, why);
    // Judge the type from the header alone, before waiting for (and buffering) the payload.
    if (!c.authenticated && h->type != Type::hello) {
      return reject(c, store::Refusal::malformed,
                    "sent " + store::type_name(h->type) + " before HELLO");
    }
    if (c.authenticated && !store::is_request(h->type)) {
      return reject(c, store::Refusal::malformed,
                    "sent an unexpected " + store::type_name(h->type) + " frame");
    }
    const size_t total = store::kHeaderBytes + h->length;
    if (c.in.size() < total) {
      c.in.reserve(total);
      break;
    }
    auto m = store::parse_payload(h->type, c.in.data() + store::kHeaderBytes, h->length, why);
    if (!m) return reject(c, store::Refusal::malformed, why);
    c.in.erase(c.in.begin(), c.in.begin() + std::ptrdiff_t(total));
    if (h->type == Type::hello) {
      hello(c, *m);
    } else {
      handle(c, std::move(*m));
    }
  }
  if (c.in.empty() && c.in.capacity() > store::kKeepCapacity) std::vector<uint8_t>().swap(c.in);
}

bool TcpStoreServer::Impl::flush(ServerConnection& c) {
  while (c.replying()) {
    const ssize_t n = ::send(c.fd, c.out.data() + c.out_sent, c.out.size() - c.out_sent,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out_sent += size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;  // POLLOUT resumes
    drop(c);  // the peer went away: it no longer needs an answer
    return false;
  }
  c.out.clear();
  c.out_sent = 0;
  if (c.out.capacity() > store::kKeepCapacity) std::vector<uint8_t>().swap(c.out);
  return true;
}

void TcpStoreServer::Impl::hello(ServerConnection& c, const Message& m) {
  // Compare without an early exit, so timing does not reveal how much of the token matched.
  unsigned diff = m.value.size() != token_.size();
  for (size_t i = 0; i < m.value.size() && i < token_.size(); ++i) {
    diff |= m.value[i] ^ uint8_t(token_[i]);
  }
  if (diff != 0) {
    // Say why before closing, so the client can report it; best effort, never waited for.
    Message e;
    e.type = Type::error;
    const std::string text = "wrong job token";
    e.value.assign(text.begin(), text.end());
    const auto f = store::encode(e);
    ssize_t ignored = ::send(c.fd, f.data(), f.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)ignored;
    return reject(c, store::Refusal::wrong_token, "wrong job token");
  }
  c.authenticated = true;
  forget_unauthenticated(c);
  reply(c, Message{});
}

void TcpStoreServer::Impl::handle(ServerConnection& c, Message m) {
  switch (m.type) {
    case Type::set:
      data_[std::move(m.key)] = std::move(m.value);
      data_changed_ = true;
      reply(c, Message{});
      return;
    case Type::add: {
      int64_t now = 0;
      auto it = data_.find(m.key);
      if (it != data_.end()) {
        auto v = store::parse_counter(it->second);
        if (!v) return reply_error(c, "key '" + m.key + "' holds a value that is not a counter");
        now = *v;
      }
      int64_t next = 0;
      if (__builtin_add_overflow(now, m.number, &next)) {
        return reply_error(c, "adding " + std::to_string(m.number) + " to key '" + m.key +
                                  "' (now " + std::to_string(now) + ") overflows int64");
      }
      const std::string text = std::to_string(next);
      data_[m.key].assign(text.begin(), text.end());
      data_changed_ = true;
      Message r;
      r.type = Type::counter;
      r.number = next;
      reply(c, r);
      return;
    }
    case Type::will:
      c.wills.emplace_back(std::move(m.key), std::move(m.value));
      reply(c, Message{});
      return;
    case Type::get:
    case Type::wait:
      if (try_answer(c, m)) return;
      if (m.timeout_ms == 0) return reply(c, Message{.type = Type::timeout});
      if (m.timeout_ms != store::kNoTimeout) {
        c.deferred_until = Clock::now() + std::chrono::milliseconds(m.timeout_ms);
      }
      c.deferred = std::move(m);
      return;
    default:
      return;  // pump() lets only requests through
  }
}

bool TcpStoreServer::Impl::try_answer(ServerConnection& c, const Message& m) {
  if (m.type == Type::get) {
    auto it = data_.find(m.key);
    if (it == data_.end()) return false;
    store::append_frame(c.out, Type::value, it->second.data(), it->second.size());
    return true;
  }
  for (const auto& k : m.keys) {
    if (!data_.count(k)) return false;
  }
  reply(c, Message{});
  return true;
}

void TcpStoreServer::Impl::answer_deferred() {
  // An answered request lets its connection's next frame run, which may be another SET.
  while (data_changed_) {
    data_changed_ = false;
    for (auto& c : conns_) {
      if (c->closed || !c->deferred || !try_answer(*c, *c->deferred)) continue;
      c->deferred.reset();
      c->deferred_until = Clock::time_point::max();
      try {
        pump(*c);
      } catch (const std::exception& e) {
        reject(*c, store::Refusal::internal, std::string("internal error: ") + e.what());
      }
    }
  }
}

void TcpStoreServer::Impl::reply(ServerConnection& c, const Message& m) {
  const auto f = store::encode(m);
  c.out.insert(c.out.end(), f.begin(), f.end());
}

void TcpStoreServer::Impl::reply_error(ServerConnection& c, const std::string& text) {
  Message e;
  e.type = Type::error;
  e.value.assign(text.begin(),
                 text.begin() + std::ptrdiff_t(std::min(text.size(), store::kMaxErrorBytes)));
  reply(c, e);
}

void TcpStoreServer::Impl::reject(ServerConnection& c, store::Refusal cause,
                                  const std::string& why) {
  refusals_.refused(cause, c.peer, why);
  ++rejected_;
  close(c);
}

void TcpStoreServer::Impl::drop(ServerConnection& c) {
  STRATA_LOG(TRACE, "STORE") << "connection from " << c.peer << " closed";
  close(c);
}

void TcpStoreServer::Impl::close(ServerConnection& c) {
  if (c.closed) return;
  c.closed = true;
  if (!c.authenticated) forget_unauthenticated(c);
  for (auto& [key, value] : c.wills) {  // parked requests waiting for them: answer_deferred()
    data_[std::move(key)] = std::move(value);
    data_changed_ = true;
  }
  c.wills.clear();
}

void TcpStoreServer::Impl::forget_unauthenticated(const ServerConnection& c) {
  auto it = unauthenticated_.find(c.source);
  if (--it->second == 0) unauthenticated_.erase(it);
  --unauthenticated_total_;
}

void TcpStoreServer::Impl::expire(Clock::time_point now) {
  for (auto& c : conns_) {
    if (c->closed) continue;
    if (!c->authenticated && now - c->accepted >= store::kHelloDeadline) {
      reject(*c, store::Refusal::silent,
             "sent no HELLO within " + std::to_string(store::kHelloDeadline.count()) + " s");
    } else if (c->deferred && now >= c->deferred_until) {
      c->deferred.reset();
      c->deferred_until = Clock::time_point::max();
      reply(*c, Message{.type = Type::timeout});
      try {
        pump(*c);
      } catch (const std::exception& e) {
        reject(*c, store::Refusal::internal, std::string("internal error: ") + e.what());
      }
    }
  }
  refusals_.summarize(now);
}

void TcpStoreServer::Impl::sweep() {
  std::erase_if(conns_, [](const std::unique_ptr<ServerConnection>& c) {
    if (c->closed) ::close(c->fd);
    return c->closed;
  });
  open_ = conns_.size();
}

TcpStoreServer::TcpStoreServer(const TcpStoreOptions& options)
    : impl_(std::make_unique<Impl>(options)) {}
TcpStoreServer::~TcpStoreServer() = default;
uint16_t TcpStoreServer::port() const { return impl_->port(); }
uint64_t TcpStoreServer::rejected_connections() const { return impl_->rejected(); }
size_t TcpStoreServer::open_connections() const { return impl_->open(); }

}  // namespace strata
