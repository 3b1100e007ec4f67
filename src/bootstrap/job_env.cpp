#include "bootstrap/job_env.hpp"

#include <cstdlib>
#include <functional>
#include <string>

#include "strata/error.hpp"

namespace strata::bootstrap {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int integer(const char* name, int fallback, bool required) {
  const char* v = env(name);
  if (!v) {
    if (required) {
      throw Error(ErrorCode::invalid_argument, {.op = "bootstrap"},
                  std::string(name) + " is not set (launch with mpirun, torchrun or strata-run)");
    }
    return fallback;
  }
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > (1 << 24)) {
    throw Error(ErrorCode::invalid_argument, {.op = "bootstrap"},
                std::string(name) + "='" + v + "' is not a valid non-negative integer");
  }
  return int(x);
}

}  // namespace

JobEnv read_job_env() {
  JobEnv e;
  if (env("OMPI_COMM_WORLD_SIZE") && !env("STRATA_IGNORE_MPI")) {
    e.source = JobEnv::Source::mpirun;
    e.rank = integer("OMPI_COMM_WORLD_RANK", 0, true);
    e.size = integer("OMPI_COMM_WORLD_SIZE", 1, true);
    e.local_rank = integer("OMPI_COMM_WORLD_LOCAL_RANK", 0, false);
    e.local_size = integer("OMPI_COMM_WORLD_LOCAL_SIZE", 1, false);
  } else {
    e.source = JobEnv::Source::torchrun;
    e.rank = integer("RANK", 0, true);
    e.size = integer("WORLD_SIZE", 1, true);
    e.local_rank = integer("LOCAL_RANK", e.rank, false);
    e.local_size = integer("LOCAL_WORLD_SIZE", e.size, false);
    e.master_addr = env("MASTER_ADDR") ? env("MASTER_ADDR") : "127.0.0.1";
    e.master_port = integer("MASTER_PORT", 0, true);
    if (const char* t = env("STRATA_JOB_TOKEN")) {
      e.token = t;
    } else {
      // torchrun sets no secret: derive one that at least separates concurrent jobs.
      std::string basis = std::string(env("TORCHELASTIC_RUN_ID") ? env("TORCHELASTIC_RUN_ID") : "") +
                          "|" + e.master_addr + "|" + std::to_string(e.master_port) + "|" +
                          std::to_string(e.size);
      e.token = "derived-" + std::to_string(std::hash<std::string>{}(basis));
    }
  }
  if (e.size < 1 || e.rank >= e.size) {
    throw Error(ErrorCode::invalid_argument, {.op = "bootstrap"},
                "rank " + std::to_string(e.rank) + " is not below world size " +
                    std::to_string(e.size));
  }
  return e;
}

}  // namespace strata::bootstrap
