// The store client: one blocking socket, one request at a time under a mutex, every wait bounded
// by poll(). A request whose reply did not arrive in time leaves the stream out of step (the reply
// may still come), so the connection is dropped and the next call reconnects.
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <thread>

#include "store/socket_util.hpp"
#include "store/wire.hpp"
#include "strata/error.hpp"
#include "strata/store.hpp"

namespace strata {

using store::Message;
using store::Type;

class TcpStore::Impl {
 public:
  explicit Impl(const TcpStoreOptions& o) : options_(o) {
    std::lock_guard<std::mutex> l(mu_);
    connect_locked();
  }
  ~Impl() {
    if (fd_ >= 0) ::close(fd_);
  }

  /// Sends `m` and returns the reply, or throws; `timeout` bounds the whole exchange.
  Message call(const Message& m, std::chrono::milliseconds timeout, const std::string& what);

 private:
  [[noreturn]] void fail(ErrorCode code, const std::string& op, const std::string& why);
  void connect_locked();
  void send_all(const std::vector<uint8_t>& f, Clock::time_point until, const std::string& op);
  void recv_exact(uint8_t* p, size_t n, Clock::time_point until, const std::string& op);
  Message exchange(const Message& m, Clock::time_point until, const std::string& op);

  TcpStoreOptions options_;
  std::mutex mu_;
  int fd_ = -1;
};

void TcpStore::Impl::fail(ErrorCode code, const std::string& op, const std::string& why) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;  // out of step or dead: reconnect on the next call
  throw Error(code, {.op = op},
              why + " (store at " + options_.host + ":" + std::to_string(options_.port) + ")");
}

void TcpStore::Impl::connect_locked() {
  const auto until = Clock::now() + options_.connect_timeout;
  sockaddr_in a = store::resolve(options_.host, options_.port, "store.connect");
  int last_errno = 0;
  while (fd_ < 0) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      fd_ = fd;
      break;
    }
    last_errno = errno;
    ::close(fd);
    if (Clock::now() >= until) {
      throw Error(ErrorCode::timeout, {.op = "store.connect"},
                  "cannot reach the store at " + store::describe(a) + " within " +
                      std::to_string(options_.connect_timeout.count()) + " ms: " +
                      std::strerror(last_errno));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 0 may not be up yet
  }
  Message hello;
  hello.type = Type::hello;
  hello.value.assign(options_.token.begin(), options_.token.end());
  Message r = exchange(hello, until + std::chrono::seconds(10), "store.connect");
  if (r.type != Type::ok) fail(ErrorCode::peer_failure, "store.connect", "handshake refused");
}

void TcpStore::Impl::send_all(const std::vector<uint8_t>& f, Clock::time_point until,
                              const std::string& op) {
  size_t done = 0;
  while (done < f.size()) {
    ssize_t n = ::send(fd_, f.data() + done, f.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += size_t(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      fail(ErrorCode::peer_failure, op, std::string("send failed: ") + std::strerror(errno));
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    if (left.count() <= 0) fail(ErrorCode::timeout, op, "timed out sending the request");
    pollfd p{fd_, POLLOUT, 0};
    ::poll(&p, 1, int(std::min<int64_t>(left.count(), 1000)));
  }
}

void TcpStore::Impl::recv_exact(uint8_t* p, size_t n, Clock::time_point until,
                                const std::string& op) {
  size_t done = 0;
  while (done < n) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    if (left.count() <= 0) fail(ErrorCode::timeout, op, "timed out");
    pollfd pf{fd_, POLLIN, 0};
    if (::poll(&pf, 1, int(std::min<int64_t>(left.count() + 1, 1000))) <= 0) continue;
    ssize_t r = ::recv(fd_, p + done, n - done, MSG_DONTWAIT);
    if (r == 0) fail(ErrorCode::peer_failure, op, "the store closed the connection");
    if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      fail(ErrorCode::peer_failure, op, std::string("receive failed: ") + std::strerror(errno));
    }
    if (r > 0) done += size_t(r);
  }
}

Message TcpStore::Impl::exchange(const Message& m, Clock::time_point until, const std::string& op) {
  send_all(store::encode(m), until, op);
  uint8_t head[store::kHeaderBytes];
  recv_exact(head, sizeof head, until, op);
  std::string why;
  auto h = store::parse_header(head, why);
  if (!h) fail(ErrorCode::peer_failure, op, "malformed reply: " + why);
  std::vector<uint8_t> payload(h->length);
  recv_exact(payload.data(), payload.size(), until, op);
  auto r = store::parse_payload(*h, payload.data(), why);
  if (!r) fail(ErrorCode::peer_failure, op, "malformed reply: " + why);
  return *r;
}

Message TcpStore::Impl::call(const Message& m, std::chrono::milliseconds timeout,
                             const std::string& what) {
  std::lock_guard<std::mutex> l(mu_);
  const std::string op = what.substr(0, what.find(' '));
  if (fd_ < 0) connect_locked();
  try {
    Message r = exchange(m, Clock::now() + timeout, op);
    if (r.type == Type::error) {
      throw Error(ErrorCode::invalid_argument, {.op = op},
                  std::string(r.value.begin(), r.value.end()));
    }
    return r;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::timeout) throw;
    throw Error(ErrorCode::timeout, {.op = op},
                what + ": not available after " + std::to_string(timeout.count()) + " ms");
  }
}

namespace {
// Requests that the server answers at once still get a bound, generous enough for a busy server.
constexpr std::chrono::milliseconds kPromptReply{120000};

std::string quoted(const std::vector<std::string>& keys) {
  std::string s;
  for (size_t i = 0; i < keys.size() && i < 4; ++i) s += (i ? ", '" : "'") + keys[i] + "'";
  if (keys.size() > 4) s += ", ...";
  return s;
}
}  // namespace

TcpStore::TcpStore(const TcpStoreOptions& o) : impl_(std::make_unique<Impl>(o)) {}
TcpStore::~TcpStore() = default;

void TcpStore::set(const std::string& key, const Bytes& value) {
  Message m;
  m.type = Type::set;
  m.key = key;
  m.value = value;
  impl_->call(m, kPromptReply, "store.set of key '" + key + "'");
}

Bytes TcpStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  Message m;
  m.type = Type::get;
  m.key = key;
  return impl_->call(m, timeout, "store.get of key '" + key + "'").value;
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  Message m;
  m.type = Type::add;
  m.key = key;
  m.delta = delta;
  Message r = impl_->call(m, kPromptReply, "store.add of key '" + key + "'");
  return r.delta;
}

void TcpStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  Message m;
  m.type = Type::wait;
  m.keys = keys;
  impl_->call(m, timeout, "store.wait for keys " + quoted(keys));
}

}  // namespace strata
