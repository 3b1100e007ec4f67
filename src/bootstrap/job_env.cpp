#include "bootstrap/job_env.hpp"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "base/config.hpp"
#include "bootstrap/user_secret.hpp"
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
      throw Error(
          ErrorCode::invalid_argument, {.op = "bootstrap"},
          std::string(name) + " is not set (launch with mpirun, torchrun, srun or strata-run)");
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

[[noreturn]] void malformed(const char* name, const std::string& value, const char* why) {
  throw Error(ErrorCode::invalid_argument, {.op = "bootstrap"},
              std::string(name) + "='" + value + "' " + why);
}

// Torchrun and Slurm carry no secret: the token is derived from what names the job (every
// rank sees the same) keyed with this user's secret file (user_secret.hpp), so that another
// user, who can read the job's address, port, size and ids, cannot compute it; 128 bits.
std::string derived_token(const std::string& basis) {
  const std::string secret = user_secret();
  char h[40];
  std::snprintf(h, sizeof h, "%016zx%016zx", std::hash<std::string>{}(secret + "|" + basis),
                std::hash<std::string>{}(basis + "|" + secret));
  return std::string("derived-") + h;
}

void read_slurm(JobEnv& e) {
  e.rank = integer("SLURM_PROCID", 0, true);
  e.size = integer(env("SLURM_NTASKS") ? "SLURM_NTASKS" : "SLURM_NPROCS", 1, true);
  e.local_rank = integer("SLURM_LOCALID", 0, false);
  const char* per_node = env("SLURM_STEP_TASKS_PER_NODE") ? env("SLURM_STEP_TASKS_PER_NODE")
                                                          : env("SLURM_TASKS_PER_NODE");
  e.local_size =
      per_node ? slurm_tasks_on_node(per_node, integer("SLURM_NODEID", 0, false)) : e.size;
  const char* nodes = nullptr;
  for (const char* n : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    if (!nodes) nodes = env(n);
  }
  if (env("MASTER_ADDR")) {
    e.master_addr = env("MASTER_ADDR");
  } else if (nodes) {
    e.master_addr = first_slurm_host(nodes);
  } else {
    throw Error(ErrorCode::invalid_argument, {.op = "bootstrap"},
                "srun set SLURM_PROCID but no SLURM_STEP_NODELIST or SLURM_JOB_NODELIST, and "
                "MASTER_ADDR is not set: cannot tell where rank 0 serves the store");
  }
  const int job = integer("SLURM_JOB_ID", 0, false), step = integer("SLURM_STEP_ID", 0, false);
  // Every rank derives the same port; concurrent steps on one node get different ones.
  e.master_port = env("MASTER_PORT") ? integer("MASTER_PORT", 0, true)
                                     : 20000 + int((uint64_t(job) * 131 + uint64_t(step)) % 20000);
  e.token = env("STRATA_JOB_TOKEN")
                ? env("STRATA_JOB_TOKEN")
                : derived_token("slurm|" + std::to_string(job) + "." + std::to_string(step));
}

}  // namespace

std::string first_slurm_host(const std::string& list) {
  const size_t comma = list.find(','), bracket = list.find('[');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket)) {
    return list.substr(0, comma);  // a plain name first
  }
  // prefix[a-b,c...]: the first range's first number, with its zero padding.
  size_t end = bracket + 1;
  while (end < list.size() && std::isdigit(static_cast<unsigned char>(list[end]))) ++end;
  if (end == bracket + 1 || end == list.size() ||
      (list[end] != '-' && list[end] != ',' && list[end] != ']')) {
    malformed("SLURM_NODELIST", list, "is not a Slurm hostlist (name[1-4,7],other)");
  }
  std::string host = list.substr(0, bracket) + list.substr(bracket + 1, end - bracket - 1);
  // A suffix after the bracket ("n[1-2]-ib") belongs to every name.
  const size_t close = list.find(']', end);
  if (close == std::string::npos) malformed("SLURM_NODELIST", list, "has an unclosed '['");
  const size_t after = list.find(',', close);
  return host +
         list.substr(close + 1, after == std::string::npos ? std::string::npos : after - close - 1);
}

int slurm_tasks_on_node(const std::string& list, int node) {
  // Entries "n" or "n(xk)" separated by commas, each covering k nodes.
  size_t at = 0;
  int first_node = 0;
  while (at < list.size()) {
    size_t next = list.find(',', at);
    const std::string item =
        list.substr(at, next == std::string::npos ? std::string::npos : next - at);
    int tasks = 0, repeat = 1;
    char tail[8] = {};
    if (std::sscanf(item.c_str(), "%d(x%d)%7s", &tasks, &repeat, tail) < 1 || tasks < 1 ||
        repeat < 1 || tail[0] != '\0') {
      malformed("SLURM_TASKS_PER_NODE", list, "is not a Slurm tasks-per-node list (2(x3),1)");
    }
    if (node < first_node + repeat) return tasks;
    first_node += repeat;
    if (next == std::string::npos) break;
    at = next + 1;
  }
  malformed("SLURM_TASKS_PER_NODE", list,
            ("has no entry for node " + std::to_string(node)).c_str());
}

JobEnv read_job_env() {
  JobEnv e;
  if (env("OMPI_COMM_WORLD_SIZE") && !env("STRATA_IGNORE_MPI")) {
    e.source = JobEnv::Source::mpirun;
    e.rank = integer("OMPI_COMM_WORLD_RANK", 0, true);
    e.size = integer("OMPI_COMM_WORLD_SIZE", 1, true);
    e.local_rank = integer("OMPI_COMM_WORLD_LOCAL_RANK", 0, false);
    e.local_size = integer("OMPI_COMM_WORLD_LOCAL_SIZE", 1, false);
  } else if (!env("RANK") && env("SLURM_PROCID")) {
    e.source = JobEnv::Source::slurm;
    read_slurm(e);
  } else {
    e.source = JobEnv::Source::torchrun;
    e.rank = integer("RANK", 0, true);
    e.size = integer("WORLD_SIZE", 1, true);
    e.local_rank = integer("LOCAL_RANK", e.rank, false);
    e.local_size = integer("LOCAL_WORLD_SIZE", e.size, false);
    e.master_addr = env("MASTER_ADDR") ? env("MASTER_ADDR") : "127.0.0.1";
    e.master_port = integer("MASTER_PORT", 0, true);
    // Under torchrun its agent holds MASTER_PORT with a store of its own: Strata's goes beside
    // it, on the next port unless STRATA_STORE_PORT says which (every rank derives the same).
    e.beside_agent_store = env("TORCHELASTIC_USE_AGENT_STORE") &&
                           std::string(env("TORCHELASTIC_USE_AGENT_STORE")) == "True";
    if (config().store_port >= 0) {
      e.master_port = config().store_port;
    } else if (e.beside_agent_store && e.master_port > 0) {
      e.master_port += 1;
    }
    if (const char* t = env("STRATA_JOB_TOKEN")) {
      e.token = t;
    } else {
      e.token = derived_token(
          std::string(env("TORCHELASTIC_RUN_ID") ? env("TORCHELASTIC_RUN_ID") : "") + "|" +
          e.master_addr + "|" + std::to_string(e.master_port) + "|" + std::to_string(e.size));
    }
  }
  if (e.size < 1 || e.rank >= e.size) {
    throw Error(
        ErrorCode::invalid_argument, {.op = "bootstrap"},
        "rank " + std::to_string(e.rank) + " is not below world size " + std::to_string(e.size));
  }
  return e;
}

}  // namespace strata::bootstrap
