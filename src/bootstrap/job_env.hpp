// How this process learns its place in the job: Open MPI's environment, torchrun's or Slurm's.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "strata/store.hpp"

namespace strata::bootstrap {

struct JobEnv {
  enum class Source { mpirun, torchrun, slurm } source;
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string master_addr;  // torchrun, slurm: where rank 0's store listens
  int master_port = 0;
  std::string token;  // per-job secret for the store
  /// torchrun's agent serves its own store on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE):
  /// Strata's then listens on MASTER_PORT + 1 (master_port holds it). STRATA_STORE_PORT, when
  /// set (strata-run sets it), wins under any torchrun-style launcher.
  bool beside_agent_store = false;
};

/// Reads the environment; throws strata::Error naming the missing or malformed variable.
/// Precedence: mpirun (OMPI_COMM_WORLD_*), then torchrun style (RANK), then srun (SLURM_PROCID),
/// so that mpirun or torchrun inside a Slurm allocation still win over the allocation's variables.
JobEnv read_job_env();

/// The first host of a Slurm hostlist: "node[07-09,12],gpu1" -> "node07".
std::string first_slurm_host(const std::string& hostlist);
/// This node's entry of a Slurm tasks-per-node list: "2(x3),1" with node 3 -> 1.
int slurm_tasks_on_node(const std::string& tasks_per_node, int node);

/// The job's store: rank 0 serves it, every rank (rank 0 too) is a client. Under mpirun the
/// server's address and a fresh token travel by MPI_Bcast; under torchrun they come from
/// MASTER_ADDR / MASTER_PORT and STRATA_JOB_TOKEN; under srun from the step's first node and a
/// port derived from the job and step ids (MASTER_ADDR / MASTER_PORT override them).
/// `cancelled` (may be empty) is asked while this rank waits for the store to come up
/// (TcpStoreOptions::cancelled); mpirun's broadcast cannot be cancelled.
std::shared_ptr<Store> connect_store(JobEnv& env, const std::function<bool()>& cancelled = {});

}  // namespace strata::bootstrap
