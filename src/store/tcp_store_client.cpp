// The store client: one non-blocking socket, one request at a time under a mutex, every wait
// bounded by poll() and a deadline.
//
// Timeouts: a GET or WAIT tells the server its timeout, and the server answers TIMEOUT when it
// passes, so the connection stays in step and is kept (and with it the client's WILLs: a
// connection that closes is a client that died). Only when the server does not answer even
// kServerGrace later, or on any failure that leaves the stream in an unknown state, does the
// client close its socket; a late reply would otherwise be taken for the answer to the next
// request. The next call then opens a new connection and says HELLO again; the server forgets
// the parked request when it sees the close. Reconnecting lazily, not inside the failing call,
// keeps the timeout prompt even when the server is gone. An ERROR reply (ADD on a non-counter)
// leaves the stream in step, so the connection is kept.
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "store/client_socket.hpp"
#include "store/wire.hpp"
#include "strata/error.hpp"
#include "strata/store.hpp"

namespace strata {
namespace store {
namespace {

using std::chrono::milliseconds;

// SET and ADD are answered at once; this only bounds a wedged server or a dead network.
constexpr milliseconds kPromptReply{120000};
// The handshake may use the rest of the connect budget, but gets at least this much.
constexpr milliseconds kHandshakeAtLeast{5000};
// Longer timeouts are treated as "forever" (and cannot overflow a time_point).
constexpr milliseconds kForever{std::chrono::hours(24 * 365)};
// How long after a GET's or WAIT's own timeout the server's TIMEOUT may take to come.
constexpr milliseconds kServerGrace{5000};

/// A timeout as the server takes it: UINT32_MAX ms (49 days and more) is "never".
uint32_t wire_timeout(milliseconds t) {
  return uint32_t(std::clamp<int64_t>(t.count(), 0, int64_t(UINT32_MAX)));
}

std::string ms(milliseconds t) { return std::to_string(t.count()) + " ms"; }

/// A key as it appears in an error message: quoted, non-printable bytes escaped, long keys cut.
std::string quote(const std::string& key) {
  std::string s = "'";
  for (size_t i = 0; i < key.size() && i < 200; ++i) {
    const unsigned char ch = static_cast<unsigned char>(key[i]);
    if (ch >= 0x20 && ch < 0x7f && ch != '\\') {
      s += char(ch);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", ch);
      s += hex;
    }
  }
  return s + (key.size() > 200 ? "...'" : "'");
}

std::string quote(const std::vector<std::string>& keys) {
  std::string s;
  for (size_t i = 0; i < keys.size() && i < 8; ++i) s += (i ? ", " : "") + quote(keys[i]);
  if (keys.size() > 8) s += " and " + std::to_string(keys.size() - 8) + " more";
  return s;
}

Clock::time_point deadline_after(milliseconds t) {
  return Clock::now() + std::clamp(t, milliseconds(0), kForever);
}

}  // namespace
}  // namespace store

using std::chrono::milliseconds;
using store::Io;
using store::Message;
using store::Type;

class TcpStore::Impl {
 public:
  explicit Impl(const TcpStoreOptions& o)
      : options_(o), server_(o.host + ":" + std::to_string(o.port)) {
    Message hello;
    hello.type = Type::hello;
    hello.value.assign(o.token.begin(), o.token.end());
    if (auto p = store::request_problem(hello); !p.empty()) {
      throw Error(ErrorCode::invalid_argument, store::at("store.connect"), p);
    }
    std::lock_guard<std::mutex> lock(mu_);
    connect_locked("store.connect");
    options_.cancelled = nullptr;  // the caller's wait is over; reconnections are not its
  }
  ~Impl() { disconnect(); }

  /// Sends `request` and returns the reply of type `expected`, or throws. `timeout` bounds the
  /// exchange (not a reconnection); `what` completes "... within N ms" in a timeout error.
  Message call(const char* op, const Message& request, Type expected, milliseconds timeout,
               const std::string& what);
  /// This end's address ("" if getsockname fails).
  std::string local_address() {
    std::lock_guard<std::mutex> lock(mu_);
    if (fd_ < 0) connect_locked("store.connect");
    sockaddr_in a{};
    socklen_t len = sizeof a;
    char text[INET_ADDRSTRLEN] = {};
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
        !inet_ntop(AF_INET, &a.sin_addr, text, sizeof text)) {
      return {};
    }
    return text;
  }

 private:
  void connect_locked(const char* op);
  // Says HELLO on fd_: true when accepted, false (fd_ closed, `why` set) when the connection was
  // closed without an answer; throws when refused or on any other failure.
  bool handshake(const char* op, Clock::time_point deadline, std::string& why);
  int try_connect(const sockaddr_in& a, Clock::time_point deadline, std::string& why);
  void disconnect();
  Io exchange(const Message& request, Clock::time_point deadline, Message& reply, std::string& why);
  Io send_all(const uint8_t* p, size_t n, Clock::time_point deadline) {
    return store::send_all(fd_, p, n, deadline, errno_);
  }
  Io recv_exact(uint8_t* p, size_t n, Clock::time_point deadline) {
    return store::recv_exact(fd_, p, n, deadline, errno_);
  }
  [[noreturn]] void fail(const char* op, Io io, const std::string& why);

  TcpStoreOptions options_;   // as given, but `cancelled` (the constructor's only)
  const std::string server_;  // "host:port" as configured, for messages
  std::mutex mu_;
  int fd_ = -1;          // -1: the next call connects
  bool was_up_ = false;  // a handshake succeeded once
  int errno_ = 0;
};

void TcpStore::Impl::disconnect() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

int TcpStore::Impl::try_connect(const sockaddr_in& a, Clock::time_point deadline,
                                std::string& why) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    why = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  // Non-blocking, so an unreachable host cannot hold us past the deadline.
  int err = 0;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      const short ev = store::wait_for(fd, POLLOUT, deadline);
      socklen_t len = sizeof err;
      if (ev == 0) {
        err = ETIMEDOUT;
      } else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
        err = errno;
      }
    }
  }
  if (err != 0) {
    why = std::strerror(err);
    errno_ = err;
    ::close(fd);
    return -1;
  }
  if (store::connected_to_itself(fd)) {  // the server is not listening yet: retry
    why = "connected to itself (no server listening yet)";
    errno_ = EAGAIN;
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // requests are small
  return fd;
}

void TcpStore::Impl::connect_locked(const char* op) {
  const auto deadline = store::deadline_after(options_.connect_timeout);
  auto backoff = milliseconds(10);
  std::string why;
  // The server may not be up yet (or its name not yet resolvable), or a flood of connections may
  // have crowded this one out before its HELLO was read: retry until the deadline.
  for (;;) {
    sockaddr_in a{};
    std::string resolve_why;
    if (!store::resolve_ipv4(options_.host, options_.port, /*passive=*/false, a, resolve_why)) {
      why = "cannot resolve '" + options_.host + "': " + resolve_why;
    } else {
      fd_ = try_connect(a, deadline, why);
      // Refused after it was up: the server is gone, not late (under from_env it lives in rank
      // 0's process). Waiting out connect_timeout would hold a survivor's error for minutes.
      if (fd_ < 0 && was_up_ && errno_ == ECONNREFUSED) {
        throw Error(
            ErrorCode::peer_failure, store::at(op),
            "the store at " + server_ + " is gone (it refused a reconnection: " + why + ")");
      }
      if (fd_ >= 0 && handshake(op, deadline, why)) return;
    }
    const auto now = Clock::now();
    if (now < deadline)
      std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    if (options_.cancelled && options_.cancelled()) {
      throw Error(ErrorCode::aborted, store::at("store.connect"),
                  "cancelled while waiting to reach the store at " + server_ + " (" + why + ")");
    }
    if (Clock::now() >= deadline) {  // checked after the pause, so `why` is the last real try's
      throw Error(ErrorCode::timeout, store::at("store.connect"),
                  "cannot reach the store at " + server_ + " within " +
                      store::ms(options_.connect_timeout) + ": " + why);
    }
    backoff = std::min(backoff * 2, milliseconds(500));
  }
}

bool TcpStore::Impl::handshake(const char* op, Clock::time_point deadline, std::string& why) {
  Message hello;
  hello.type = Type::hello;
  hello.value.assign(options_.token.begin(), options_.token.end());
  Message reply;
  const auto hs_deadline = std::max(deadline, Clock::now() + store::kHandshakeAtLeast);
  const Io io = exchange(hello, hs_deadline, reply, why);
  if (io == Io::done && reply.type == Type::ok) {
    was_up_ = true;
    return true;
  }
  disconnect();
  if (io == Io::done && reply.type == Type::error) {
    // Refused, not gone: the store is up and this client is wrong for it.
    const std::string reason(reply.value.begin(), reply.value.end());
    throw Error(ErrorCode::invalid_argument, store::at(op),
                "the store at " + server_ + " refused this client: " + reason +
                    (reason == "wrong job token"
                         ? " (every rank of a job needs the same STRATA_JOB_TOKEN; without one it "
                           "is derived from MASTER_ADDR, MASTER_PORT, WORLD_SIZE and "
                           "TORCHELASTIC_RUN_ID, so one of these differs between ranks, or this "
                           "rank reached another job's store)"
                         : ""));
  }
  // Closed without a word: a store refusing a client says why, so this one was crowded out
  // (or the listener is not a Strata store): worth another try.
  if (io == Io::closed || (io == Io::failed && (errno_ == ECONNRESET || errno_ == EPIPE))) {
    why =
        "it closed the connection during the handshake (crowded out by a flood of "
        "connections, or not a Strata store; see the server's log)";
    return false;
  }
  if (io == Io::timeout) {
    throw Error(ErrorCode::timeout, store::at(op),
                "no handshake reply from " + server_ + " (is it a Strata store?)");
  }
  if (io == Io::done) why = "unexpected " + store::type_name(reply.type) + " reply to HELLO";
  fail(op, Io::failed, why);
}

void TcpStore::Impl::fail(const char* op, Io io, const std::string& why) {
  disconnect();
  if (io == Io::closed) {
    throw Error(ErrorCode::peer_failure, store::at(op),
                "the store at " + server_ + " closed the connection");
  }
  // A reset or broken pipe is the peer's doing; anything else is our socket's.
  const bool peer = errno_ == ECONNRESET || errno_ == EPIPE || errno_ == 0;
  throw Error(peer ? ErrorCode::peer_failure : ErrorCode::transport, store::at(op),
              "connection to the store at " + server_ + " failed: " + why);
}

Io TcpStore::Impl::exchange(const Message& request, Clock::time_point deadline, Message& reply,
                            std::string& why) {
  errno_ = 0;
  const auto frame = store::encode(request);
  Io io = send_all(frame.data(), frame.size(), deadline);
  if (io != Io::done) {
    why = std::strerror(errno_);
    return io;
  }
  uint8_t head[store::kHeaderBytes];
  io = recv_exact(head, sizeof head, deadline);
  if (io != Io::done) {
    why = std::strerror(errno_);
    return io;
  }
  auto h = store::parse_header(head, why);
  if (!h || store::is_request(h->type) || h->type == Type::hello) {
    if (h) why = "a " + store::type_name(h->type) + " frame";
    why = "malformed reply: " + why;
    return Io::failed;
  }
  std::vector<uint8_t> payload(h->length);
  io = recv_exact(payload.data(), payload.size(), deadline);
  if (io != Io::done) {
    why = std::strerror(errno_);
    return io;
  }
  if (h->type == Type::value) {  // the common large case: no second copy
    reply = Message{};
    reply.type = Type::value;
    reply.value = std::move(payload);
    return Io::done;
  }
  auto m = store::parse_payload(h->type, payload.data(), payload.size(), why);
  if (!m) {
    why = "malformed reply: " + why;
    return Io::failed;
  }
  reply = std::move(*m);
  return Io::done;
}

Message TcpStore::Impl::call(const char* op, const Message& request, Type expected,
                             milliseconds timeout, const std::string& what) {
  if (auto p = store::request_problem(request); !p.empty()) {
    throw Error(ErrorCode::invalid_argument, store::at(op), p);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) connect_locked(op);
  Message reply;
  std::string why;
  const bool timed = request.type == Type::get || request.type == Type::wait;
  const Io io = exchange(
      request, store::deadline_after(timed ? timeout + store::kServerGrace : timeout), reply, why);
  if (io == Io::timeout) {
    disconnect();  // a late reply must not be read as the next one's: see the top of the file
  }
  if (io == Io::timeout || (io == Io::done && reply.type == Type::timeout)) {
    throw Error(ErrorCode::timeout, store::at(op),
                what + " within " + store::ms(timeout) + " (store at " + server_ + ")");
  }
  if (io != Io::done) fail(op, io, why);
  if (reply.type == Type::error) {
    throw Error(ErrorCode::invalid_argument, store::at(op),
                "the store refused it: " + std::string(reply.value.begin(), reply.value.end()));
  }
  if (reply.type != expected) {
    fail(
        op, Io::failed,
        "expected a " + store::type_name(expected) + " reply, got " + store::type_name(reply.type));
  }
  return reply;
}

TcpStore::TcpStore(const TcpStoreOptions& options) : impl_(std::make_unique<Impl>(options)) {}
TcpStore::~TcpStore() = default;

void TcpStore::set(const std::string& key, const Bytes& value) {
  Message m;
  m.type = Type::set;
  m.key = key;
  m.value = value;
  impl_->call("store.set", m, Type::ok, store::kPromptReply,
              "no reply to SET of key " + store::quote(key));
}

Bytes TcpStore::get(const std::string& key, milliseconds timeout) {
  Message m;
  m.type = Type::get;
  m.key = key;
  m.timeout_ms = store::wire_timeout(timeout);
  return impl_
      ->call("store.get", m, Type::value, timeout, "key " + store::quote(key) + " was not set")
      .value;
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  Message m;
  m.type = Type::add;
  m.key = key;
  m.number = delta;
  return impl_
      ->call("store.add", m, Type::counter, store::kPromptReply,
             "no reply to ADD to key " + store::quote(key))
      .number;
}

void TcpStore::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  Message m;
  m.type = Type::wait;
  m.keys = keys;
  m.timeout_ms = store::wire_timeout(timeout);
  impl_->call("store.wait", m, Type::ok, timeout,
              "keys " + store::quote(keys) + " were not all set");
}

bool TcpStore::set_when_gone(const std::string& key, const Bytes& value) {
  Message m;
  m.type = Type::will;
  m.key = key;
  m.value = value;
  impl_->call("store.set_when_gone", m, Type::ok, store::kPromptReply,
              "no reply to WILL of key " + store::quote(key));
  return true;
}

void TcpStore::erase(const std::string& key) {
  Message m;
  m.type = Type::erase;
  m.key = key;
  impl_->call("store.erase", m, Type::ok, store::kPromptReply,
              "no reply to ERASE of key " + store::quote(key));
}

std::string TcpStore::local_address() { return impl_->local_address(); }

}  // namespace strata
