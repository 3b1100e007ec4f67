// The store server: one thread, poll() over non-blocking sockets. Each connection has its own
// read and write buffers, so a slow or silent client never blocks the others; GET and WAIT are
// answered when their keys appear. Anything malformed or unauthenticated closes that connection
// only, with one log line, and is counted.
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <list>
#include <map>
#include <optional>
#include <thread>

#include "log.hpp"
#include "store/socket_util.hpp"
#include "store/wire.hpp"
#include "strata/error.hpp"
#include "strata/store.hpp"

namespace strata {

using store::Message;
using store::Type;

class TcpStoreServer::Impl {
 public:
  explicit Impl(const TcpStoreOptions& o);
  ~Impl();
  uint16_t port = 0;
  std::atomic<uint64_t> rejected{0};

 private:
  struct Conn {
    int fd;
    std::string peer;
    bool authed = false;
    Clock::time_point since;
    std::vector<uint8_t> in, out;
    std::optional<Message> pending;  // a GET or WAIT waiting for its keys
  };

  void loop();
  void accept_all();
  bool read_from(Conn& c);             // false: close it
  bool handle_frames(Conn& c);         // false: close it
  bool answer(Conn& c, const Message& m);  // false: deferred
  void reject(Conn& c, const std::string& why);
  bool flush(Conn& c);                 // false: close it
  void reply(Conn& c, Type t, std::vector<uint8_t> value);

  std::string token_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::list<Conn> conns_;
  std::map<std::string, std::vector<uint8_t>> data_;
  std::thread thread_;
};

TcpStoreServer::Impl::Impl(const TcpStoreOptions& o) : token_(o.token) {
  sockaddr_in a = store::resolve(o.host, o.port, "store.listen");
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listen_fd_, 512) != 0) {
    int e = errno;
    ::close(listen_fd_);
    throw Error(ErrorCode::transport, {.op = "store.listen"},
                "cannot listen on " + store::describe(a) + ": " + std::strerror(e));
  }
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  store::set_nonblocking(listen_fd_);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  thread_ = std::thread([this] { loop(); });
}

TcpStoreServer::Impl::~Impl() {
  stop_ = true;
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
  (void)ignored;
  thread_.join();
  for (auto& c : conns_) ::close(c.fd);
  ::close(listen_fd_);
  ::close(wake_fd_);
}

void TcpStoreServer::Impl::reject(Conn& c, const std::string& why) {
  STRATA_LOG(WARN, "STORE") << "refused connection from " << c.peer << ": " << why;
  ++rejected;
}

void TcpStoreServer::Impl::reply(Conn& c, Type t, std::vector<uint8_t> value) {
  Message m;
  m.type = t;
  m.value = std::move(value);
  auto f = store::encode(m);
  c.out.insert(c.out.end(), f.begin(), f.end());
}

bool TcpStoreServer::Impl::answer(Conn& c, const Message& m) {
  switch (m.type) {
    case Type::set:
      data_[m.key] = m.value;
      reply(c, Type::ok, {});
      return true;
    case Type::get: {
      auto it = data_.find(m.key);
      if (it == data_.end()) return false;
      reply(c, Type::ok, it->second);
      return true;
    }
    case Type::wait:
      for (const auto& k : m.keys) {
        if (!data_.count(k)) return false;
      }
      reply(c, Type::ok, {});
      return true;
    case Type::add: {
      auto& v = data_[m.key];
      if (!v.empty() && v.size() != 8) {
        std::string e = "key '" + m.key + "' holds a value that is not a counter";
        reply(c, Type::error, std::vector<uint8_t>(e.begin(), e.end()));
        return true;
      }
      int64_t cur = 0;
      if (v.size() == 8) std::memcpy(&cur, v.data(), 8);
      cur += m.delta;
      v.resize(8);
      std::memcpy(v.data(), &cur, 8);
      reply(c, Type::ok, v);
      return true;
    }
    default: return true;  // not a request; handle_frames has refused it already
  }
}

bool TcpStoreServer::Impl::handle_frames(Conn& c) {
  size_t used = 0;
  while (!c.pending && c.in.size() - used >= store::kHeaderBytes) {
    std::string why;
    auto h = store::parse_header(c.in.data() + used, why);
    if (!h) {
      reject(c, why);
      return false;
    }
    if (c.in.size() - used - store::kHeaderBytes < h->length) break;  // wait for the rest
    auto m = store::parse_payload(*h, c.in.data() + used + store::kHeaderBytes, why);
    used += store::kHeaderBytes + h->length;
    if (!m) {
      reject(c, why);
      return false;
    }
    if (!c.authed) {
      if (m->type != Type::hello || std::string(m->value.begin(), m->value.end()) != token_) {
        reject(c, m->type == Type::hello ? "wrong job token" : "first message is not HELLO");
        return false;
      }
      c.authed = true;
      reply(c, Type::ok, {});
      continue;
    }
    if (m->type == Type::hello || m->type == Type::ok || m->type == Type::error) {
      reject(c, "unexpected message type " + std::to_string(int(m->type)));
      return false;
    }
    if (!answer(c, *m)) c.pending = std::move(*m);
  }
  c.in.erase(c.in.begin(), c.in.begin() + used);
  return true;
}

bool TcpStoreServer::Impl::flush(Conn& c) {
  if (c.out.empty()) return true;
  ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
  if (n > 0) c.out.erase(c.out.begin(), c.out.begin() + n);
  return n >= 0 || errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

bool TcpStoreServer::Impl::read_from(Conn& c) {
  uint8_t buf[65536];
  for (;;) {
    ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n > 0) {
      c.in.insert(c.in.end(), buf, buf + n);
      if (c.in.size() > store::kMaxPayload + store::kHeaderBytes + sizeof buf) {
        reject(c, "sent more than one maximal frame without waiting");
        return false;
      }
      continue;
    }
    if (n == 0) return false;  // closed by the peer
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

void TcpStoreServer::Impl::accept_all() {
  for (;;) {
    sockaddr_in a{};
    socklen_t len = sizeof a;
    int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    if (conns_.size() >= 4096) {
      STRATA_LOG(WARN, "STORE") << "refused connection from " << store::describe(a)
                                << ": too many open connections";
      ++rejected;
      ::close(fd);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conns_.push_back(Conn{fd, store::describe(a), false, Clock::now(), {}, {}, {}});
  }
}

void TcpStoreServer::Impl::loop() {
  std::vector<pollfd> fds;
  while (!stop_) {
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (auto& c : conns_) {
      fds.push_back({c.fd, short(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
    }
    if (::poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) break;
    if (fds[1].revents & POLLIN) accept_all();
    size_t i = 2;
    const auto now = Clock::now();
    for (auto it = conns_.begin(); it != conns_.end(); ++i) {
      Conn& c = *it;
      bool keep = true;
      short ev = i < fds.size() && fds[i].fd == c.fd ? fds[i].revents : 0;
      if (ev & (POLLIN | POLLHUP | POLLERR)) keep = read_from(c) && handle_frames(c);
      if (keep && !c.authed && now - c.since > std::chrono::seconds(10)) {
        reject(c, "no HELLO within 10 s");
        keep = false;
      }
      keep = keep && flush(c);
      if (!keep) {
        ::close(c.fd);
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
    // A SET or ADD may have completed deferred requests: retry them, then frames behind them.
    for (auto it = conns_.begin(); it != conns_.end();) {
      Conn& c = *it;
      bool keep = true;
      if (c.pending && answer(c, *c.pending)) {
        c.pending.reset();
        keep = handle_frames(c) && flush(c);
      }
      if (!keep) {
        ::close(c.fd);
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
  }
}

TcpStoreServer::TcpStoreServer(const TcpStoreOptions& o) : impl_(std::make_unique<Impl>(o)) {}
TcpStoreServer::~TcpStoreServer() = default;
uint16_t TcpStoreServer::port() const { return impl_->port; }
uint64_t TcpStoreServer::rejected_connections() const { return impl_->rejected; }

}  // namespace strata
