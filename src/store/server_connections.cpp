// The store server's connections: accepting them within their limits (per source and in all, a
// newcomer over a limit evicting the oldest unauthenticated one), reading and sending their
// bytes, closing them (their WILLs come true), and expiring what waited too long.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.hpp"
#include "store/server_impl.hpp"
#include "strata/error.hpp"

namespace strata {

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
    service_or_reject(*conns_.back(), POLLIN);
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
    if (c->closed || c->authenticated || c->source != *from) continue;
    // Its HELLO may be waiting unread (a client slow to be scheduled): take it before judging.
    service_or_reject(*c, POLLIN);
    if (c->closed) return true;  // it said something wrong, or went: that made the room
    if (!c->authenticated) {
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

void TcpStoreServer::Impl::service_or_reject(ServerConnection& c, short revents) {
  try {
    service(c, revents);
  } catch (const std::exception& e) {
    reject(c, store::Refusal::internal, std::string("internal error: ") + e.what());
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
    if (!h && !c.authenticated) return reject_saying(c, store::Refusal::malformed, why);
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
    keys_.store(data_.size(), std::memory_order_relaxed);
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
      service_or_reject(*c, 0);  // 0: send, then handle what is buffered
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

}  // namespace strata
