// How a process finds its place in the job: Slurm's hostlists and tasks-per-node lists, and the
// precedence of mpirun, torchrun and srun variables.
#include "bootstrap/job_env.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "strata/error.hpp"

using strata::bootstrap::first_slurm_host;
using strata::bootstrap::JobEnv;
using strata::bootstrap::read_job_env;
using strata::bootstrap::slurm_tasks_on_node;

TEST(SlurmHostlist, FirstHostKeepsPaddingAndSuffix) {
  EXPECT_EQ(first_slurm_host("localhost"), "localhost");
  EXPECT_EQ(first_slurm_host("a1,b[2-3]"), "a1");
  EXPECT_EQ(first_slurm_host("node[07-09,12],gpu1"), "node07");
  EXPECT_EQ(first_slurm_host("n[3,5]"), "n3");
  EXPECT_EQ(first_slurm_host("rack[001-004]-ib,x"), "rack001-ib");
  EXPECT_THROW(first_slurm_host("node[x-1]"), strata::Error);
  EXPECT_THROW(first_slurm_host("node[1-2"), strata::Error);
}

TEST(SlurmHostlist, TasksOnNode) {
  EXPECT_EQ(slurm_tasks_on_node("4", 0), 4);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 0), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 2), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_THROW(slurm_tasks_on_node("2(x3),1", 4), strata::Error);
  EXPECT_THROW(slurm_tasks_on_node("two", 0), strata::Error);
}

namespace {
// Sets variables for one test and clears every launcher's variables first and afterwards.
struct Env {
  explicit Env(std::initializer_list<std::pair<const char*, const char*>> vars) {
    clear();
    for (auto& [k, v] : vars) setenv(k, v, 1);
  }
  ~Env() { clear(); }
  static void clear() {
    for (const char* k :
         {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "RANK", "WORLD_SIZE", "MASTER_ADDR",
          "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID",
          "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE", "SLURM_JOB_ID", "SLURM_STEP_ID",
          "STRATA_JOB_TOKEN", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_USE_AGENT_STORE",
          "TORCHELASTIC_RUN_ID"}) {
      unsetenv(k);
    }
  }
};
}  // namespace

TEST(JobEnv, SrunGivesRankSizeNodeAndAPortPerStep) {
  Env env({{"SLURM_PROCID", "5"},
           {"SLURM_NTASKS", "6"},
           {"SLURM_LOCALID", "1"},
           {"SLURM_NODEID", "2"},
           {"SLURM_STEP_NODELIST", "cn[010-012]"},
           {"SLURM_STEP_TASKS_PER_NODE", "2(x3)"},
           {"SLURM_JOB_ID", "4242"},
           {"SLURM_STEP_ID", "0"}});
  JobEnv e = read_job_env();
  EXPECT_EQ(e.source, JobEnv::Source::slurm);
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.size, 6);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_size, 2);
  EXPECT_EQ(e.master_addr, "cn010");
  EXPECT_GE(e.master_port, 20000);
  EXPECT_LT(e.master_port, 40000);
  const int port = e.master_port;
  setenv("SLURM_STEP_ID", "1", 1);
  EXPECT_NE(read_job_env().master_port, port) << "two steps of one job share a port";
  setenv("MASTER_PORT", "29555", 1);
  EXPECT_EQ(read_job_env().master_port, 29555);
}

TEST(JobEnv, TorchrunAndMpirunInsideAnAllocationWin) {
  Env env({{"SLURM_PROCID", "0"},
           {"SLURM_NTASKS", "1"},
           {"SLURM_STEP_NODELIST", "n1"},
           {"RANK", "1"},
           {"WORLD_SIZE", "2"},
           {"MASTER_PORT", "1234"}});
  EXPECT_EQ(read_job_env().source, JobEnv::Source::torchrun);
  EXPECT_EQ(read_job_env().rank, 1);
  setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
  setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  EXPECT_EQ(read_job_env().source, JobEnv::Source::mpirun);
}

// torchrun's agent serves a store of its own on MASTER_PORT: Strata's takes the next port.
TEST(JobEnv, BesideTorchrunsAgentStoreTheStoreTakesTheNextPort) {
  Env env({{"RANK", "1"},
           {"WORLD_SIZE", "2"},
           {"MASTER_PORT", "29500"},
           {"TORCHELASTIC_RUN_ID", "run"},
           {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  JobEnv e = read_job_env();
  EXPECT_TRUE(e.beside_agent_store);
  EXPECT_EQ(e.master_port, 29501);
  setenv("TORCHELASTIC_USE_AGENT_STORE", "False", 1);  // torchrun without an agent store
  e = read_job_env();
  EXPECT_FALSE(e.beside_agent_store);
  EXPECT_EQ(e.master_port, 29500);
}

TEST(JobEnv, SrunWithoutANodeListSaysWhatIsMissing) {
  Env env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}});
  try {
    read_job_env();
    FAIL() << "no error";
  } catch (const strata::Error& e) {
    EXPECT_NE(std::string(e.what()).find("SLURM_STEP_NODELIST"), std::string::npos) << e.what();
  }
}

// Torchrun and Slurm carry no secret: the derived token is keyed with a file of this user's
// (mode 0600), so another user who reads the job's address, port, size and ids cannot compute it
// (issue 33: such a process authenticated, read the store's keys and wrote some).
TEST(JobEnv, DerivedTokensAreKeyedWithThisUsersSecret) {
  char a[] = "/tmp/strata-secret-a-XXXXXX", b[] = "/tmp/strata-secret-b-XXXXXX";
  ASSERT_TRUE(mkdtemp(a) && mkdtemp(b));
  const char* saved = std::getenv("XDG_CACHE_HOME");
  const std::string saved_value = saved ? saved : "";
  Env env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1234"}});
  setenv("XDG_CACHE_HOME", a, 1);
  const std::string token = read_job_env().token;
  EXPECT_EQ(read_job_env().token, token) << "the same job, the same token";
  const std::string file = std::string(a) + "/strata/job-secret";
  struct stat st {};
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  setenv("XDG_CACHE_HOME", b, 1);  // another user's secret: another token for the same job
  EXPECT_NE(read_job_env().token, token);
  setenv("XDG_CACHE_HOME", a, 1);
  EXPECT_EQ(read_job_env().token, token);
  chmod(file.c_str(), 0644);  // readable by others: refused, naming the file
  try {
    read_job_env();
    ADD_FAILURE() << "a secret others can read was used";
  } catch (const strata::Error& e) {
    EXPECT_NE(std::string(e.what()).find(file + " has mode 0644"), std::string::npos) << e.what();
  }
  setenv("STRATA_JOB_TOKEN", "given", 1);  // a given token needs no secret
  EXPECT_EQ(read_job_env().token, "given");
  if (saved) {
    setenv("XDG_CACHE_HOME", saved_value.c_str(), 1);
  } else {
    unsetenv("XDG_CACHE_HOME");
  }
  std::filesystem::remove_all(a);
  std::filesystem::remove_all(b);
}
