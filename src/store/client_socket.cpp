#include "store/client_socket.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace strata::store {

short wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return 0;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, int(std::min<int64_t>(left, 60000)));
    if (n > 0) return p.revents;
    if (n < 0 && errno != EINTR) return POLLERR;
  }
}

Io send_all(int fd, const uint8_t* p, size_t n, Clock::time_point deadline, int& err) {
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k > 0) {
      p += k;
      n -= size_t(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      err = errno;
      return err == EPIPE || err == ECONNRESET ? Io::closed : Io::failed;
    }
    if (wait_for(fd, POLLOUT, deadline) == 0) return Io::timeout;
  }
  return Io::done;
}

Io recv_exact(int fd, uint8_t* p, size_t n, Clock::time_point deadline, int& err) {
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k > 0) {
      p += k;
      n -= size_t(k);
      continue;
    }
    if (k == 0) return Io::closed;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      err = errno;
      return err == ECONNRESET ? Io::closed : Io::failed;
    }
    if (wait_for(fd, POLLIN, deadline) == 0) return Io::timeout;
  }
  return Io::done;
}

bool connected_to_itself(int fd) {
  sockaddr_storage mine{}, peer{};
  socklen_t mine_len = sizeof mine, peer_len = sizeof peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &mine_len) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
    return false;
  }
  return mine_len == peer_len && std::memcmp(&mine, &peer, mine_len) == 0;
}

}  // namespace strata::store
