// What the store tests share (store_test.cpp: semantics, deadlines, reconnection;
// store_hostile_test.cpp: hostile input): client options, frames built by hand from the
// documented wire layout, a raw TCP connection, and a capture of the server's log.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include "base/log.hpp"
#include "store/client_socket.hpp"
#include "store/refusal_log.hpp"
#include "store/wire.hpp"
#include "strata/error.hpp"
#include "strata/store.hpp"

namespace store_test {

using namespace strata;
using namespace std::chrono_literals;
using std::chrono::milliseconds;

inline const std::string kToken = "s3cret-job-token";

inline TcpStoreOptions opts(uint16_t port, const std::string& token = kToken) {
  TcpStoreOptions o;
  o.port = port;
  o.token = token;
  o.connect_timeout = 5s;
  return o;
}

inline Bytes bytes(std::string_view s) { return Bytes(s.begin(), s.end()); }

/// A port no server listens on: a store server's, found and freed again.
inline uint16_t unused_port() { return TcpStoreServer(opts(0)).port(); }

inline milliseconds since(Clock::time_point t0) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t0);
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/// Polls `pred` until it holds or `limit` passes.
template <typename F>
inline bool eventually(F pred, milliseconds limit = 5s) {
  const auto until = Clock::now() + limit;
  while (!pred()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

/// Runs `f`, expects a strata::Error with `code`, and returns its message.
template <typename F>
inline std::string error_of(ErrorCode code, F f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(int(e.code()), int(code)) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no strata::Error thrown";
  return "";
}

// Frames built by hand rather than with store::encode, so the documented layout is tested too.
inline void put_le(std::vector<uint8_t>& b, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b.push_back(uint8_t(v >> (8 * i)));
}
inline std::vector<uint8_t> header(uint32_t magic, uint16_t version, uint16_t type,
                                   uint32_t length) {
  std::vector<uint8_t> h;
  put_le(h, magic, 4);
  put_le(h, version, 2);
  put_le(h, type, 2);
  put_le(h, length, 4);
  return h;
}
inline std::vector<uint8_t> operator+(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
inline std::vector<uint8_t> frame(store::Type t, const std::vector<uint8_t>& payload) {
  return header(store::kMagic, store::kVersion, uint16_t(t), uint32_t(payload.size())) + payload;
}
inline std::vector<uint8_t> key_field(const std::string& k) {
  std::vector<uint8_t> b;
  put_le(b, k.size(), 4);
  return b + bytes(k);
}
inline std::vector<uint8_t> hello_frame(const std::string& token = kToken) {
  return frame(store::Type::hello, bytes(token));
}
inline std::vector<uint8_t> set_frame(const std::string& k, const Bytes& v) {
  std::vector<uint8_t> len;
  put_le(len, v.size(), 4);
  return frame(store::Type::set, key_field(k) + len + v);
}
inline std::vector<uint8_t> get_frame(const std::string& k, uint32_t timeout_ms = 60000) {
  std::vector<uint8_t> t;
  put_le(t, timeout_ms, 4);
  return frame(store::Type::get, key_field(k) + t);
}
inline std::vector<uint8_t> add_frame(const std::string& k, int64_t d) {
  std::vector<uint8_t> delta;
  put_le(delta, uint64_t(d), 8);
  return frame(store::Type::add, key_field(k) + delta);
}
inline std::vector<uint8_t> wait_frame(const std::vector<std::string>& keys) {
  std::vector<uint8_t> p;
  put_le(p, 60000, 4);  // timeout in ms
  put_le(p, keys.size(), 4);
  for (const auto& k : keys) p = p + key_field(k);
  return frame(store::Type::wait, p);
}
inline const std::vector<uint8_t> kOkFrame = header(store::kMagic, store::kVersion, 16, 0);

/// A plain TCP connection to the store, for sending arbitrary bytes.
class Raw {
 public:
  explicit Raw(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    EXPECT_TRUE(ok_) << std::strerror(errno);
  }
  ~Raw() { ::close(fd_); }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;
  bool connected() const { return ok_; }

  /// Sends everything; errors are ignored (the server may already have closed).
  void send(const std::vector<uint8_t>& b) {
    size_t done = 0;
    while (done < b.size()) {
      ssize_t n = ::send(fd_, b.data() + done, b.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return;
      done += size_t(n);
    }
  }
  /// Reads exactly `n` bytes within `limit`, or nullopt.
  std::optional<std::vector<uint8_t>> read(size_t n, milliseconds limit = 2s) {
    std::vector<uint8_t> b(n);
    size_t got = 0;
    const auto until = Clock::now() + limit;
    while (got < n) {
      if (!readable_before(until)) return std::nullopt;
      ssize_t k = ::recv(fd_, b.data() + got, n - got, MSG_DONTWAIT);
      if (k <= 0 && !(k < 0 && errno == EAGAIN)) return std::nullopt;
      if (k > 0) got += size_t(k);
    }
    return b;
  }
  /// True if the server closes the connection within `limit`; anything it sends first is
  /// read and dropped.
  bool closed_within(milliseconds limit) {
    const auto until = Clock::now() + limit;
    uint8_t buf[4096];
    for (;;) {
      if (!readable_before(until)) return false;
      ssize_t k = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
      if (k == 0 || (k < 0 && errno == ECONNRESET)) return true;
    }
  }

 private:
  bool readable_before(Clock::time_point until) {
    const auto left = std::chrono::ceil<milliseconds>(until - Clock::now()).count();
    if (left < 0) return false;
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, int(left)) > 0;
  }
  int fd_ = -1;
  bool ok_ = false;
};

/// Sends this process's stderr (where the server logs) to a temporary file while it lives.
class StderrCapture {
 public:
  StderrCapture() {
    std::fflush(stderr);
    file_ = std::tmpfile();
    saved_ = ::dup(2);
    ::dup2(::fileno(file_), 2);
  }
  ~StderrCapture() {
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    if (::testing::Test::HasFailure()) {  // show what the server said
      const std::string t = text();
      std::fprintf(stderr, "--- captured log (last 8 KiB) ---\n%s\n",
                   t.substr(t.size() > 8192 ? t.size() - 8192 : 0).c_str());
    }
    std::fclose(file_);
  }
  std::string text() const {
    std::string s;
    char buf[65536];
    off_t at = 0;
    for (ssize_t n; (n = ::pread(::fileno(file_), buf, sizeof buf, at)) > 0; at += n) {
      s.append(buf, size_t(n));
    }
    return s;
  }
  /// The lines that contain every one of `parts`.
  std::vector<std::string> lines_with(std::initializer_list<std::string> parts) const {
    std::vector<std::string> found;
    std::istringstream in(text());
    for (std::string line; std::getline(in, line);) {
      bool all = true;
      for (const auto& p : parts) all = all && contains(line, p);
      if (all) found.push_back(line);
    }
    return found;
  }

 private:
  FILE* file_ = nullptr;
  int saved_ = -1;
};

inline bool warnings_logged() { return log::enabled(log::Level::WARN); }

inline const std::string kRefused = "refused connection from 127.0.0.1:";

}  // namespace store_test
