// Communicator::from_env: the world communicator of a job started by mpirun, torchrun or
// strata-run.
#include "bootstrap/job_env.hpp"
#include "log.hpp"
#include "strata/communicator.hpp"

namespace strata {

Communicator Communicator::from_env(const CommOptions& options) {
  bootstrap::JobEnv env = bootstrap::read_job_env();
  log::set_rank(env.rank);
  auto store = bootstrap::connect_store(env);
  return create(std::make_shared<PrefixStore>(store, options.name), env.rank, env.size, options);
}

}  // namespace strata
