// Communicator::from_env: the world communicator of a job started by mpirun, torchrun or
// strata-run.
#include "base/log.hpp"
#include "bootstrap/job_env.hpp"
#include "strata/communicator.hpp"
#include "strata/error.hpp"
#include "transport/ucx/factory.hpp"

namespace strata {

Communicator Communicator::from_env(const CommOptions& options) {
  bootstrap::JobEnv env = bootstrap::read_job_env();
  log::set_rank(env.rank);
  try {
    auto store = bootstrap::connect_store(env);
    return create(std::make_shared<PrefixStore>(store, options.name), env.rank, env.size, options);
  } catch (const Error& e) {
    // A rank that died while the job met may have left UCX's files behind (ucx/stale_files.hpp).
    if (e.code() == ErrorCode::timeout || e.code() == ErrorCode::peer_failure) {
      ucx::reclaim_stale_files();
    }
    throw;
  }
}

}  // namespace strata
