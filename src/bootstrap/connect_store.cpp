#include <ifaddrs.h>
#include <mpi.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "bootstrap/job_env.hpp"
#include "config.hpp"
#include "log.hpp"
#include "strata/error.hpp"

namespace strata::bootstrap {
namespace {

// Under from_env the store is served by rank 0, so a store that goes away or never comes up
// means rank 0 went away: say so (peer 0), since that is the process to look at.
template <typename F>
auto blame_rank0(F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    const bool unreachable = e.code() == ErrorCode::timeout && e.where().op == "store.connect";
    if (e.code() != ErrorCode::peer_failure && !unreachable) throw;
    ErrorContext w = e.where();
    w.peer = 0;
    throw Error(ErrorCode::peer_failure, w,
                std::string("the job's store, served by rank 0, is gone or was never up (did "
                            "rank 0 die?): ") + e.what());
  }
}

/// Rank 0 owns the server; every rank talks to it through a client.
class JobStore final : public Store {
 public:
  JobStore(std::unique_ptr<TcpStoreServer> server, const TcpStoreOptions& client)
      : server_(std::move(server)),
        client_(blame_rank0([&] { return std::make_unique<TcpStore>(client); })) {}
  // Rank 0 serves until the other ranks have let go (bounded): when it fails because another
  // rank died, the others must see that rank's absence, not the store's.
  ~JobStore() override {
    client_.reset();
    const auto until = Clock::now() + std::chrono::seconds(2);
    while (server_ && server_->open_connections() > 0 && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  void set(const std::string& k, const Bytes& v) override {
    blame_rank0([&] { client_->set(k, v); });
  }
  Bytes get(const std::string& k, std::chrono::milliseconds t) override {
    return blame_rank0([&] { return client_->get(k, t); });
  }
  int64_t add(const std::string& k, int64_t d) override {
    return blame_rank0([&] { return client_->add(k, d); });
  }
  void wait(const std::vector<std::string>& k, std::chrono::milliseconds t) override {
    blame_rank0([&] { client_->wait(k, t); });
  }

 private:
  std::unique_ptr<TcpStoreServer> server_;  // declared first: destroyed after the client
  std::unique_ptr<TcpStore> client_;
};

std::string random_token() {
  std::ifstream f("/dev/urandom", std::ios::binary);
  unsigned char b[16] = {};
  f.read(reinterpret_cast<char*>(b), sizeof b);
  char hex[33];
  for (int i = 0; i < 16; ++i) std::snprintf(hex + 2 * i, 3, "%02x", b[i]);
  return hex;
}

/// The address other nodes can reach this one at: the first up, non-loopback IPv4 interface.
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

std::shared_ptr<Store> connect_mpirun(JobEnv& env) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) {
    throw Error(ErrorCode::invalid_argument, {.rank = env.rank, .op = "bootstrap"},
                "launched by mpirun but MPI is already finalized; create the communicator first");
  }
  if (!initialized) MPI_Init(nullptr, nullptr);
  std::unique_ptr<TcpStoreServer> server;
  char msg[512] = {};
  if (env.rank == 0) {
    std::string host = config().store_addr;
    if (host.empty() && std::getenv("MASTER_ADDR")) host = std::getenv("MASTER_ADDR");
    if (host.empty()) host = env.local_size == env.size ? "127.0.0.1" : first_external_ipv4();
    TcpStoreOptions so;
    so.host = host;
    so.token = random_token();
    server = std::make_unique<TcpStoreServer>(so);
    std::snprintf(msg, sizeof msg, "%s %u %s", host.c_str(), unsigned(server->port()),
                  so.token.c_str());
  }
  MPI_Bcast(msg, sizeof msg, MPI_CHAR, 0, MPI_COMM_WORLD);
  // MPI was only the messenger; a program that initialised it itself keeps it.
  if (!initialized) MPI_Finalize();
  std::istringstream in(msg);
  TcpStoreOptions co;
  co.connect_timeout = config().timeout;
  unsigned port = 0;
  in >> co.host >> port >> co.token;
  co.port = uint16_t(port);
  env.master_addr = co.host;
  env.master_port = int(port);
  env.token = co.token;
  STRATA_LOG(INFO, "INIT") << "mpirun bootstrap: store at " << co.host << ":" << port;
  return std::make_shared<JobStore>(std::move(server), co);
}

std::shared_ptr<Store> connect_at_master(const JobEnv& env) {
  TcpStoreOptions o;
  o.host = env.master_addr;
  o.port = uint16_t(env.master_port);
  o.token = env.token;
  o.connect_timeout = config().timeout;  // rank 0 may start late, but not later than any deadline
  std::unique_ptr<TcpStoreServer> server;
  if (env.rank == 0) {
    server = std::make_unique<TcpStoreServer>(o);
    o.port = server->port();  // MASTER_PORT=0 lets a one-rank job pick any free port
  }
  STRATA_LOG(INFO, "INIT") << "env bootstrap: store at " << o.host << ":" << o.port;
  return std::make_shared<JobStore>(std::move(server), o);
}

}  // namespace

std::shared_ptr<Store> connect_store(JobEnv& env) {
  return env.source == JobEnv::Source::mpirun ? connect_mpirun(env) : connect_at_master(env);
}

}  // namespace strata::bootstrap
