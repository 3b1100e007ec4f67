// How this process learns its place in the job: Open MPI's environment or torchrun's.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "strata/store.hpp"

namespace strata::bootstrap {

struct JobEnv {
  enum class Source { mpirun, torchrun } source;
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string master_addr;  // torchrun: where rank 0's store listens
  int master_port = 0;
  std::string token;        // per-job secret for the store
};

/// Reads the environment; throws strata::Error naming the missing or malformed variable.
JobEnv read_job_env();

/// The job's store: rank 0 serves it, every rank (rank 0 too) is a client. Under mpirun the
/// server's address and a fresh token travel by MPI_Bcast; under torchrun they come from
/// MASTER_ADDR / MASTER_PORT and STRATA_JOB_TOKEN.
std::shared_ptr<Store> connect_store(JobEnv& env);

}  // namespace strata::bootstrap
