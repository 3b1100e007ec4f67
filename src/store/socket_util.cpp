#include "store/socket_util.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>

#include <cstring>

#include "strata/error.hpp"

namespace strata::store {

sockaddr_in resolve(const std::string& host, uint16_t port, const char* op) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) {
    throw Error(ErrorCode::invalid_argument, {.op = op},
                "cannot resolve store host '" + host + "': " + gai_strerror(rc));
  }
  sockaddr_in a;
  std::memcpy(&a, res->ai_addr, sizeof a);
  ::freeaddrinfo(res);
  a.sin_port = htons(port);
  return a;
}

std::string describe(const sockaddr_in& a) {
  char buf[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
  return std::string(buf) + ":" + std::to_string(ntohs(a.sin_port));
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

}  // namespace strata::store
