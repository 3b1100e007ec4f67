// A hostile neighbour of a job's store (issue 22): holds N connections to 127.0.0.1:PORT that
// never authenticate, sends garbage on every tenth, and re-opens each one the store closes, as
// fast as it can, until killed. Prints "holding N" once it first holds them all, then every
// second how many it has opened in all.
//
//   strata-store-flood PORT N
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

int open_one(int port, long serial) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);  // completes in the background
  if (serial % 10 == 0) {
    static const char garbage[] = "GET / HTTP/1.1\r\nHost: store\r\n\r\n";
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, 100) > 0) ::send(fd, garbage, sizeof garbage - 1, MSG_NOSIGNAL);
  }
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s PORT N\n", argv[0]);
    return 2;
  }
  const int port = std::atoi(argv[1]);
  const size_t n = size_t(std::atol(argv[2]));
  std::vector<pollfd> held;
  long opened = 0;
  bool announced = false;
  auto last_report = std::chrono::steady_clock::now();
  char buf[4096];
  for (;;) {
    while (held.size() < n) {
      const int fd = open_one(port, opened);
      if (fd < 0) break;
      held.push_back({fd, POLLIN, 0});
      ++opened;
    }
    if (!announced && held.size() >= n) {
      std::printf("holding %zu\n", held.size());
      std::fflush(stdout);
      announced = true;
    }
    if (::poll(held.data(), held.size(), 10) > 0) {
      for (auto& p : held) {  // closed or refused by the store: open another in its place
        if (p.revents == 0) continue;
        if (::recv(p.fd, buf, sizeof buf, MSG_DONTWAIT) > 0 && !(p.revents & (POLLHUP | POLLERR))) {
          continue;
        }
        ::close(p.fd);
        p.fd = open_one(port, opened++);
      }
      std::erase_if(held, [](const pollfd& p) { return p.fd < 0; });  // out of descriptors
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - last_report > std::chrono::seconds(1)) {
      last_report = now;
      std::printf("opened %ld\n", opened);
      std::fflush(stdout);
    }
  }
}
