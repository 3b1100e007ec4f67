// Small socket helpers shared by the store's server and client.
#pragma once

#include <netinet/in.h>

#include <string>

namespace strata::store {

/// Resolves `host` (name or dotted IPv4) and `port`; throws strata::Error naming the host.
sockaddr_in resolve(const std::string& host, uint16_t port, const char* op);
/// "a.b.c.d:port" of a peer address, for log lines.
std::string describe(const sockaddr_in& a);
void set_nonblocking(int fd);

}  // namespace strata::store
