#include "bootstrap/job_store.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstdio>
#include <thread>

#include "bootstrap/claim_conflict.hpp"
#include "strata/error.hpp"

namespace strata::bootstrap {
namespace {

// Under from_env the store is served by rank 0, so a store that goes away or never comes up
// means rank 0 went away: say so (peer 0), since that is the process to look at. Served outside
// the job (strata-store), it names that server instead.
template <typename F>
auto blame_server(bool outside, F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    const bool unreachable = e.code() == ErrorCode::timeout && e.where().op == "store.connect";
    if (e.code() != ErrorCode::peer_failure && !unreachable) throw;
    ErrorContext w = e.where();
    w.peer = outside ? -1 : 0;
    throw Error(ErrorCode::peer_failure, w,
                std::string(outside ? "the job's store, served outside the job by strata-store, "
                                      "is gone or was never up: "
                                    : "the job's store, served by rank 0, is gone or was never up "
                                      "(did rank 0 die?): ") +
                    e.what());
  }
}

class JobStore final : public Store {
 public:
  JobStore(std::unique_ptr<TcpStoreServer> server, const TcpStoreOptions& client, bool outside)
      : outside_(outside),
        server_(std::move(server)),
        client_(blame_server(outside_, [&] { return std::make_unique<TcpStore>(client); })),
        claims_(client.host + ":" + std::to_string(client.port)) {
    if (server_) {
      server_->on_counter([this](const std::string& k, int64_t v) { claims_.counted(k, v); });
    }
  }
  // Rank 0 serves until the other ranks have let go (bounded): when it fails because another
  // rank died, the others must see that rank's absence, not the store's.
  ~JobStore() override {
    if (server_) server_->on_counter(nullptr);
    client_.reset();
    const auto until = Clock::now() + std::chrono::seconds(2);
    while (server_ && server_->open_connections() > 0 && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  void set(const std::string& k, const Bytes& v) override {
    blame_server(outside_, [&] { client_->set(k, v); });
  }
  Bytes get(const std::string& k, std::chrono::milliseconds t) override {
    return blame_server(outside_, [&] { return client_->get(k, t); });
  }
  int64_t add(const std::string& k, int64_t d) override {
    return blame_server(outside_, [&] { return client_->add(k, d); });
  }
  void wait(const std::vector<std::string>& k, std::chrono::milliseconds t) override {
    blame_server(outside_, [&] { client_->wait(k, t); });
  }
  bool set_when_gone(const std::string& k, const Bytes& v) override {
    return blame_server(outside_, [&] { return client_->set_when_gone(k, v); });
  }
  void erase(const std::string& k) override {
    blame_server(outside_, [&] { client_->erase(k); });
  }
  std::string local_address() override {
    return blame_server(outside_, [&] { return client_->local_address(); });
  }

  ClaimConflict& claims() { return claims_; }
  bool serves() const { return server_ != nullptr; }

 private:
  const bool outside_;
  std::unique_ptr<TcpStoreServer> server_;  // declared first: destroyed after the client
  std::unique_ptr<TcpStore> client_;
  ClaimConflict claims_;
};

}  // namespace

std::shared_ptr<Store> make_job_store(std::unique_ptr<TcpStoreServer> server,
                                      const TcpStoreOptions& client, bool outside) {
  return std::make_shared<JobStore>(std::move(server), client, outside);
}

std::string on_claim_conflict(Store& store, std::function<void(const std::string&)> f) {
  auto* job = dynamic_cast<JobStore*>(&store);
  return job && job->serves() ? job->claims().on_conflict(std::move(f)) : std::string();
}

std::string random_token() {
  unsigned char b[16] = {};
  FILE* f = std::fopen("/dev/urandom", "rb");
  const bool ok = f && std::fread(b, 1, sizeof b, f) == sizeof b;
  if (f) std::fclose(f);
  if (!ok) throw Error(ErrorCode::internal, {.op = "bootstrap"}, "cannot read /dev/urandom");
  char hex[33];
  for (int i = 0; i < 16; ++i) std::snprintf(hex + 2 * i, 3, "%02x", b[i]);
  return hex;
}

std::string first_external_ipv4() {
  ifaddrs* list = nullptr;
  std::string found;
  if (getifaddrs(&list) != 0) return "127.0.0.1";
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    auto* in = reinterpret_cast<sockaddr_in*>(a->ifa_addr);
    if ((ntohl(in->sin_addr.s_addr) >> 24) == 127) continue;
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
    found = buf;
    break;
  }
  freeifaddrs(list);
  return found.empty() ? "127.0.0.1" : found;
}

}  // namespace strata::bootstrap
