#include <mpi.h>

#include <cstdio>
#include <sstream>

#include "base/config.hpp"
#include "base/log.hpp"
#include "bootstrap/job_env.hpp"
#include "bootstrap/job_store.hpp"
#include "strata/error.hpp"

namespace strata::bootstrap {
namespace {

std::shared_ptr<Store> connect_mpirun(JobEnv& env, const std::function<bool()>& cancelled) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) {
    throw Error(ErrorCode::invalid_argument, {.rank = env.rank, .op = "bootstrap"},
                "launched by mpirun but MPI is already finalized; create the communicator first");
  }
  if (!initialized) MPI_Init(nullptr, nullptr);
  std::unique_ptr<TcpStoreServer> server;
  // The store's address, or kFailed and why rank 0 could not start it: the others wait in the
  // broadcast, which has no deadline, so rank 0 must answer whatever happens (a bad STRATA_*
  // variable read only there used to leave every other rank waiting for ever).
  constexpr char kFailed = '!';
  char msg[512] = {};
  if (env.rank == 0) {
    try {
      std::string host = config().store_addr;
      if (host.empty() && std::getenv("MASTER_ADDR")) host = std::getenv("MASTER_ADDR");
      if (host.empty()) host = env.local_size == env.size ? "127.0.0.1" : first_external_ipv4();
      TcpStoreOptions so;
      so.host = host;
      so.token = random_token();
      server = std::make_unique<TcpStoreServer>(so);
      std::snprintf(msg, sizeof msg, "%s %u %s", host.c_str(), unsigned(server->port()),
                    so.token.c_str());
    } catch (const std::exception& e) {
      std::snprintf(msg, sizeof msg, "%c%s", kFailed, e.what());
      MPI_Bcast(msg, sizeof msg, MPI_CHAR, 0, MPI_COMM_WORLD);
      if (!initialized) MPI_Finalize();
      throw;
    }
  }
  MPI_Bcast(msg, sizeof msg, MPI_CHAR, 0, MPI_COMM_WORLD);
  // MPI was only the messenger; a program that initialised it itself keeps it.
  if (!initialized) MPI_Finalize();
  if (msg[0] == kFailed) {
    msg[sizeof msg - 1] = 0;
    throw Error(ErrorCode::invalid_argument, {.rank = env.rank, .op = "bootstrap", .peer = 0},
                std::string("rank 0 could not start the job's store: ") + (msg + 1));
  }
  std::istringstream in(msg);
  TcpStoreOptions co;
  co.connect_timeout = config().timeout;
  co.cancelled = cancelled;
  unsigned port = 0;
  in >> co.host >> port >> co.token;
  co.port = uint16_t(port);
  env.master_addr = co.host;
  env.master_port = int(port);
  env.token = co.token;
  STRATA_LOG(INFO, "INIT") << "mpirun bootstrap: store at " << co.host << ":" << port;
  return make_job_store(std::move(server), co);
}

std::shared_ptr<Store> connect_at_master(const JobEnv& env,
                                         const std::function<bool()>& cancelled) {
  TcpStoreOptions o;
  o.host = env.master_addr;
  o.port = uint16_t(env.master_port);
  o.token = env.token;
  o.connect_timeout = config().timeout;  // rank 0 may start late, but not later than any deadline
  o.cancelled = cancelled;
  std::unique_ptr<TcpStoreServer> server;
  if (env.rank == 0 && !config().store_outside) {
    try {
      server = std::make_unique<TcpStoreServer>(o);
    } catch (const Error& e) {
      if (!env.beside_agent_store) throw;
      throw Error(e.code(), e.where(),
                  std::string(e.what()) +
                      "; MASTER_PORT is torchrun's agent store, and Strata's listens on the "
                      "port after it, or on STRATA_STORE_PORT: set that to a free port");
    }
    o.port = server->port();  // MASTER_PORT=0 lets a one-rank job pick any free port
  }
  STRATA_LOG(INFO, "INIT") << "env bootstrap: store at " << o.host << ":" << o.port;
  return make_job_store(std::move(server), o, config().store_outside);
}

}  // namespace

std::shared_ptr<Store> connect_store(JobEnv& env, const std::function<bool()>& cancelled) {
  return env.source == JobEnv::Source::mpirun ? connect_mpirun(env, cancelled)
                                              : connect_at_master(env, cancelled);
}

}  // namespace strata::bootstrap
