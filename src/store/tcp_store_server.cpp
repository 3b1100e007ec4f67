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
#include <cerrno>
#include <cstring>

#include "base/log.hpp"
#include "store/server_impl.hpp"
#include "strata/error.hpp"

namespace strata {

namespace store {
size_t fd_budget() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 1 << 20;
  return r.rlim_cur > 4 * kReservedFds ? size_t(r.rlim_cur) - kReservedFds : size_t(r.rlim_cur) / 2;
}
}  // namespace store

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
    throw Error(
        ErrorCode::transport, store::at("store.listen"),
        "cannot listen on " + store::address_string(a) + ": " + std::strerror(e) +
            (e == EADDRINUSE ? " (another job on this port? give each its own MASTER_PORT)" : ""));
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
    service_or_reject(*conns_[i], ev);
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

TcpStoreServer::TcpStoreServer(const TcpStoreOptions& options)
    : impl_(std::make_unique<Impl>(options)) {}
TcpStoreServer::~TcpStoreServer() = default;
uint16_t TcpStoreServer::port() const { return impl_->port(); }
uint64_t TcpStoreServer::rejected_connections() const { return impl_->rejected(); }
size_t TcpStoreServer::open_connections() const { return impl_->open(); }
size_t TcpStoreServer::keys() const { return impl_->keys(); }
void TcpStoreServer::on_counter(std::function<void(const std::string&, int64_t)> f) {
  impl_->set_on_counter(std::move(f));
}

}  // namespace strata
