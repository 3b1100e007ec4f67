// kill -9 one of four ranks and check that the three survivors fail, each naming the dead rank,
// within STRATA_TIMEOUT + 5 s, never with wrong data, and that nothing is left behind (processes,
// files in /dev/shm or /tmp). Three moments, 20 repetitions each (STRATA_KILL_REPS), random victim
// and random kill time:
//   Collective: all ranks in back-to-back 1 MiB all-reduces (the others wait in one).
//   Between:    small all-reduces with 30 ms of compute between them (the kill lands outside).
//   Start-up:   within 100 ms of the victim joining the job's store (its node record is there),
//               while the ranks meet (a job here is ready after 60-80 ms). The ranks' timeout is
//               60 s, yet every survivor must fail within 2 s naming the victim: the store tells
//               the ranks waiting for it that it is gone (issue 22). 30 repetitions.
// and the first two again on two emulated nodes of two ranks (STRATA_NODE_ID), the all-reduce
// forced hierarchical: a survivor waiting in its node's shared memory for a neighbour must learn
// of a death that neighbour saw on its rail (10 repetitions each; UCX on TCP, as between machines:
// a peer killed in the middle of a UCX shared-memory (CMA) read makes UCX abort the reader, see
// docs/architecture.md). Every rank is ready after its first collective: a peer that dies while
// UCX 1.13 is still connecting to it over TCP makes UCX abort the survivor (architecture.md,
// "Connecting"), so the hierarchical scenarios kill only once the groups are connected.
// SetupFailure adds one fixed case: a rank that gives up in setup because of another rank, and
// exits, must not be named in place of the rank it reported.
// The ranks are tests/fault/fault_rank.cpp, launched the torchrun way (RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT) by this driver, which unlike mpirun lets the survivors finish.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "strata/store.hpp"

namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr int kRanks = 4;
constexpr int kTimeoutSeconds = 3;  // STRATA_TIMEOUT of the ranks
constexpr auto kGrace = 5s;         // the bound: timeout + 5 s

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::set<std::string> entries(const char* dir) {
  std::set<std::string> s;
  for (const auto& e : fs::directory_iterator(dir)) s.insert(e.path().filename().string());
  return s;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Job {
  fs::path dir;
  int port = 0;  // of the job's store
  std::vector<pid_t> pids;
  std::vector<int> status = std::vector<int>(kRanks, -1);
  std::vector<Clock::time_point> ended = std::vector<Clock::time_point>(kRanks);
};

// In a forked child: rank r of kRanks, launched the torchrun way.
void set_rank_env(int r, const std::string& port, int timeout_seconds) {
  ::setenv("RANK", std::to_string(r).c_str(), 1);
  ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(kRanks).c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", std::to_string(kRanks).c_str(), 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", port.c_str(), 1);
  ::setenv("STRATA_JOB_TOKEN", "kill-test", 1);
  ::setenv("STRATA_TIMEOUT", std::to_string(timeout_seconds).c_str(), 1);
}

// `ranks_per_node` > 0: ranks on emulated nodes of that many, all-reduce forced hierarchical.
Job launch(const std::string& mode, const fs::path& dir, int ranks_per_node,
           int timeout_seconds = kTimeoutSeconds, int port_to_use = 0) {
  Job job;
  job.dir = dir;
  job.port = port_to_use ? port_to_use : free_port();
  const std::string port = std::to_string(job.port);
  for (int r = 0; r < kRanks; ++r) {
    const std::string out = (dir / ("rank" + std::to_string(r) + ".log")).string();
    const std::string ready = (dir / ("ready" + std::to_string(r))).string();
    pid_t pid = ::fork();
    if (pid == 0) {
      set_rank_env(r, port, timeout_seconds);
      if (ranks_per_node > 0) {
        ::setenv("STRATA_NODE_ID", ("emu" + std::to_string(r / ranks_per_node)).c_str(), 1);
        ::setenv("STRATA_ALGO", "all_reduce=hierarchical", 1);
      }
      FILE* f = std::freopen(out.c_str(), "w", stderr);
      (void)f;
      ::dup2(::fileno(stderr), STDOUT_FILENO);
      ::execl(STRATA_FAULT_RANK, STRATA_FAULT_RANK, mode.c_str(), ready.c_str(), nullptr);
      ::_exit(127);
    }
    job.pids.push_back(pid);
  }
  return job;
}

bool all_ready(const Job& job, Clock::duration limit) {
  const auto end = Clock::now() + limit;
  for (int r = 0; r < kRanks; ++r) {
    while (!fs::exists(job.dir / ("ready" + std::to_string(r)))) {
      if (Clock::now() > end) return false;
      std::this_thread::sleep_for(5ms);
    }
  }
  return true;
}

// Reaps the ranks until `until`; returns false (after killing them) if any is still running.
bool reap(Job& job, Clock::time_point until) {
  int left = kRanks;
  for (int r = 0; r < kRanks; ++r) left -= job.status[r] != -1;
  while (left > 0) {
    int st = 0;
    pid_t p = ::waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      for (int r = 0; r < kRanks; ++r) {
        if (job.pids[r] == p) {
          job.status[r] = st;
          job.ended[r] = Clock::now();
          --left;
        }
      }
      continue;
    }
    if (Clock::now() > until) {
      for (int r = 0; r < kRanks; ++r) {
        if (job.status[r] == -1) ::kill(job.pids[r], SIGKILL);
      }
      for (int r = 0; r < kRanks; ++r) {
        if (job.status[r] == -1) ::waitpid(job.pids[r], &job.status[r], 0);
      }
      return false;
    }
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

// Reaps the ranks but `spared` until `until`; false if one of them is still running then.
bool reap_all_but(Job& job, int spared, Clock::time_point until) {
  for (;;) {
    bool left = false;
    for (int r = 0; r < kRanks; ++r) left = left || (r != spared && job.status[r] == -1);
    if (!left) return true;
    int st = 0;
    const pid_t p = ::waitpid(-1, &st, WNOHANG);
    for (int r = 0; r < kRanks && p > 0; ++r) {
      if (job.pids[r] == p) job.status[r] = st, job.ended[r] = Clock::now();
    }
    if (p > 0) continue;
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(2ms);
  }
}

int reps(int fallback) {
  const char* v = std::getenv("STRATA_KILL_REPS");
  return v ? std::atoi(v) : fallback;
}

// Every survivor of `job` ended by `killed` + `bound` with exit code `code`, its log holding
// `names_victim`.
void check_survivors(const Job& job, int victim, Clock::time_point killed, bool all_ended,
                     std::chrono::milliseconds delay, int code, const std::string& names_victim,
                     Clock::duration bound = std::chrono::seconds(kTimeoutSeconds) + kGrace) {
  for (int r = 0; r < kRanks; ++r) {
    if (r == victim) continue;
    const std::string log = slurp(job.dir / ("rank" + std::to_string(r) + ".log"));
    SCOPED_TRACE("victim " + std::to_string(victim) + " killed after " +
                 std::to_string(delay.count()) + " ms; survivor " + std::to_string(r) + " said:\n" +
                 log);
    ASSERT_TRUE(all_ended) << "a survivor was still running "
                           << std::chrono::duration_cast<std::chrono::milliseconds>(bound).count()
                           << " ms after the kill";
    ASSERT_TRUE(WIFEXITED(job.status[r])) << "survivor crashed (status " << job.status[r] << ")";
    EXPECT_EQ(WEXITSTATUS(job.status[r]), code) << "survivor did not fail with its error";
    EXPECT_NE(log.find(names_victim), std::string::npos)
        << "the error does not name rank " << victim << " (" << names_victim << ")";
    EXPECT_LE(job.ended[r] - killed, bound);
    // Once Strata has said what failed, UCX does not repeat it (ucx::quiet_after_failure).
    const size_t said = log.find("strata: ");
    EXPECT_EQ(log.find(" UCX  ", said == std::string::npos ? log.size() : said), std::string::npos)
        << "UCX's lines after Strata's error";
  }
}

// Nothing left: every rank reaped, no process of the job, no file it made.
void check_nothing_left(const Job& job, const std::set<std::string>& shm_before,
                        const std::set<std::string>& tmp_before) {
  for (pid_t p : job.pids) EXPECT_NE(::kill(p, 0), 0) << "process " << p << " is still there";
  EXPECT_EQ(entries("/dev/shm"), shm_before) << "files left in /dev/shm";
  EXPECT_EQ(entries("/tmp"), tmp_before) << "files left in /tmp";
}

// One scenario: `reps` jobs, each losing a random rank at a random moment.
void run_scenario(const std::string& name, const std::string& mode, bool in_start_up,
                  int ranks_per_node = 0, int repetitions = 20) {
  std::mt19937 rng(std::random_device{}());
  const fs::path base = fs::path(STRATA_KILL_DIR) / name;
  fs::remove_all(base);
  for (int rep = 0; rep < reps(repetitions); ++rep) {
    SCOPED_TRACE("repetition " + std::to_string(rep) + " of " + mode +
                 (in_start_up ? " (start-up)" : ""));
    const fs::path dir = base / std::to_string(rep);
    fs::create_directories(dir);
    const auto shm_before = entries("/dev/shm");
    const auto tmp_before = entries("/tmp");

    const int victim = int(rng() % kRanks);
    Job job = launch(mode, dir, ranks_per_node, in_start_up ? 60 : kTimeoutSeconds);
    if (in_start_up) {  // the victim has joined the job's store: its node record is there
      strata::TcpStore store({.port = uint16_t(job.port), .token = "kill-test"});
      store.get("world/node/" + std::to_string(victim), 30s);
    } else {
      ASSERT_TRUE(all_ready(job, 30s)) << "the job did not start";
    }
    const auto delay = std::chrono::milliseconds(rng() % (in_start_up ? 100 : 300));
    std::this_thread::sleep_for(delay);
    ::kill(job.pids[victim], SIGKILL);
    const auto killed = Clock::now();
    const Clock::duration bound =
        in_start_up ? Clock::duration(2s) : std::chrono::seconds(kTimeoutSeconds) + kGrace;
    const bool all_ended = reap(job, killed + bound + 1s);

    check_survivors(job, victim, killed, all_ended, delay, 3,
                    "culprit=" + std::to_string(victim) + "\n", bound);
    check_nothing_left(job, shm_before, tmp_before);
    if (::testing::Test::HasFailure()) return;
  }
}

// A pipeline of the reference GPT (tp2 x pp2 on the four ranks) loses a rank mid-step: every
// survivor, whichever groups it shares with the dead rank, fails naming it by its world rank
// (trainer/failure_report.hpp; rank 0, which serves the job's store that carries the report, is
// named from the store being gone). Activations go between stages by UCX send/recv, which
// Strata keeps off CMA (a peer dying in the middle of a CMA read makes UCX 1.13 abort the reader;
// docs/architecture.md, "What a job listens on").
TEST(KillRank, PipelineStageMidStep) {
  std::mt19937 rng(std::random_device{}());
  const fs::path base = fs::path(STRATA_KILL_DIR) / "pipeline";
  fs::remove_all(base);
  for (int rep = 0; rep < reps(10); ++rep) {
    const fs::path dir = base / std::to_string(rep);
    fs::create_directories(dir);
    const auto shm_before = entries("/dev/shm");
    const auto tmp_before = entries("/tmp");
    const std::string port = std::to_string(free_port());
    Job job;
    job.dir = dir;
    for (int r = 0; r < kRanks; ++r) {
      const std::string out = (dir / ("rank" + std::to_string(r) + ".log")).string();
      pid_t pid = ::fork();
      if (pid == 0) {
        set_rank_env(r, port, kTimeoutSeconds);
        FILE* f = std::freopen(out.c_str(), "w", stderr);
        (void)f;
        ::dup2(::fileno(stderr), STDOUT_FILENO);
        ::execl(STRATA_GPT, STRATA_GPT, "train", "--config", "tiny", "--layers", "4", "--heads",
                "4", "--tp", "2", "--pp", "2", "--micro-batches", "4", "--steps", "1000000",
                "--eval-every", "0", "--sample", "0", nullptr);
        ::_exit(127);
      }
      job.pids.push_back(pid);
    }
    // Ready once rank 0 has printed its third step.
    const auto start = Clock::now();
    while (slurp(dir / "rank0.log").find("step     3/") == std::string::npos) {
      ASSERT_LT(Clock::now() - start, 30s) << "the job did not start:\n"
                                           << slurp(dir / "rank0.log");
      std::this_thread::sleep_for(10ms);
    }
    const int victim = int(rng() % kRanks);
    const auto delay = std::chrono::milliseconds(rng() % 300);
    std::this_thread::sleep_for(delay);
    ::kill(job.pids[victim], SIGKILL);
    const auto killed = Clock::now();
    const bool all_ended = reap(job, killed + std::chrono::seconds(kTimeoutSeconds) + kGrace);
    SCOPED_TRACE("repetition " + std::to_string(rep) + ", victim " + std::to_string(victim));
    check_survivors(job, victim, killed, all_ended, delay, 1,
                    "world rank " + std::to_string(victim) + " died");
    check_nothing_left(job, shm_before, tmp_before);
    if (::testing::Test::HasFailure()) return;
  }
}

// Rank 1 finishes its part of setup, reports that rank 2 died and exits while the others wait
// for it in the barrier that ends setup; rank 2 lives. Every other rank must name rank 2, the
// report, not rank 1, the process gone from the table (kill_test once caught rank 3 naming rank 1
// when rank 1 had given up in setup because of rank 2).
// A rank that is stopped (SIGSTOP), not dead, on the network path (STRATA_SHM=0): the survivors
// time out, and each names the stopped rank, not the neighbour it happened to wait for (which
// waits for the stopped one itself) (issue 22).
TEST(StopRank, TheStoppedRankIsNamedAtTheTimeout) {
  std::mt19937 rng(std::random_device{}());
  const fs::path dir = fs::path(STRATA_KILL_DIR) / "stopped";
  fs::remove_all(dir);
  fs::create_directories(dir);
  ::setenv("STRATA_SHM", "0", 1);  // inherited by the ranks
  Job job = launch("collective", dir, 0);
  ::unsetenv("STRATA_SHM");
  ASSERT_TRUE(all_ready(job, 30s)) << "the job did not start";
  const int victim = int(rng() % kRanks);
  ::kill(job.pids[victim], SIGSTOP);
  const auto stopped = Clock::now();
  const bool all_ended =
      reap_all_but(job, victim, stopped + std::chrono::seconds(kTimeoutSeconds) + kGrace);
  ::kill(job.pids[victim], SIGKILL);
  ::waitpid(job.pids[victim], &job.status[victim], 0);
  if (!all_ended) reap(job, Clock::now() + 1s);  // kills what is left
  check_survivors(job, victim, stopped, all_ended, 0ms, 3,
                  "culprit=" + std::to_string(victim) + "\n");
  for (int r = 0; r < kRanks; ++r) {
    if (r == victim) continue;
    const std::string log = slurp(dir / ("rank" + std::to_string(r) + ".log"));
    EXPECT_NE(log.find("is stopped"), std::string::npos) << "rank " << r << ":\n" << log;
  }
}

TEST(SetupFailure, TheOthersNameTheRankItReportedNotTheRankThatGaveUp) {
  const fs::path dir = fs::path(STRATA_KILL_DIR) / "gives_up_in_setup";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto shm_before = entries("/dev/shm");
  const auto tmp_before = entries("/tmp");
  Job job = launch("gives_up_in_setup", dir, 0);
  const auto started = Clock::now();
  ASSERT_TRUE(reap(job, started + std::chrono::seconds(kTimeoutSeconds) + kGrace))
      << "a rank was still running at timeout + 5 s";
  for (int r = 0; r < kRanks; ++r) {
    const std::string log = slurp(dir / ("rank" + std::to_string(r) + ".log"));
    SCOPED_TRACE("rank " + std::to_string(r) + " said:\n" + log);
    ASSERT_TRUE(WIFEXITED(job.status[r])) << "crashed (status " << job.status[r] << ")";
    EXPECT_EQ(WEXITSTATUS(job.status[r]), 3) << "did not fail with a strata::Error";
    EXPECT_NE(log.find("culprit=2\n"), std::string::npos) << "the error does not name rank 2";
  }
  EXPECT_EQ(entries("/dev/shm"), shm_before) << "files left in /dev/shm";
  EXPECT_EQ(entries("/tmp"), tmp_before) << "files left in /tmp";
}

// Two jobs of one user started together on one port with one token (what torchrun's derived
// token gives two runs with the same address, port and size): the second job's rank 0 cannot
// serve, its other ranks and the first job's race to claim ranks 1-3, and the winners form one
// world across both jobs. Every process of both must fail, naming the cause, none compute on.
TEST(TwoJobs, OnOnePortEveryProcessOfBothFailsNamingTheCause) {
  const fs::path dir = fs::path(STRATA_KILL_DIR) / "two_jobs";
  fs::remove_all(dir);
  fs::create_directories(dir / "a");
  fs::create_directories(dir / "b");
  Job a = launch("collective", dir / "a", 0);
  Job b = launch("collective", dir / "b", 0, kTimeoutSeconds, a.port);
  // Each pid waited for by itself: reap() takes any child, the other job's too.
  const auto until = Clock::now() + 30s;
  bool running = true;
  while (running) {
    running = false;
    for (Job* job : {&a, &b}) {
      for (int r = 0; r < kRanks; ++r) {
        if (job->status[r] != -1) continue;
        if (::waitpid(job->pids[r], &job->status[r], WNOHANG) > 0) continue;
        job->status[r] = -1;
        running = true;
        if (Clock::now() > until) ::kill(job->pids[r], SIGKILL);
      }
    }
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_LE(Clock::now(), until) << "a process of the two jobs still ran 30 s after the start";
  for (Job* job : {&a, &b}) {
    for (int r = 0; r < kRanks; ++r) {
      const std::string log = slurp(job->dir / ("rank" + std::to_string(r) + ".log"));
      SCOPED_TRACE("job " + job->dir.filename().string() + " rank " + std::to_string(r) +
                   " said:\n" + log);
      ASSERT_TRUE(WIFEXITED(job->status[r])) << "crashed (status " << job->status[r] << ")";
      EXPECT_EQ(WEXITSTATUS(job->status[r]), 3) << "did not fail with a strata::Error";
      const bool named = log.find("claimed by two processes") != std::string::npos ||
                         log.find("another job on this port") != std::string::npos;
      EXPECT_TRUE(named) << "the error does not name the cause";
    }
  }
}

TEST(KillRank, DuringAllReduce) { run_scenario("all_reduce", "collective", false); }
// The network path (STRATA_SHM=0, UCX without CMA by default): a survivor's transport error
// ("Connection reset by remote peer") is the echo of the death; each survivor names the dead
// rank, not none, nor a survivor that reported it and exited (issue 33).
TEST(KillRank, DuringAllReduceOnTheNetworkPath) {
  ::setenv("STRATA_SHM", "0", 1);  // inherited by the ranks
  run_scenario("all_reduce_net", "collective", false, 0, 10);
  ::unsetenv("STRATA_SHM");
}
TEST(KillRank, BetweenCollectives) { run_scenario("between", "between", false); }
TEST(KillRank, InTheFirst100MsOfStartUp) { run_scenario("start_up", "collective", true, 0, 30); }
TEST(KillRank, DuringHierarchicalAllReduce) {
  run_scenario("hier_all_reduce", "collective", false, 2, 10);
}
TEST(KillRank, BetweenHierarchicalCollectives) {
  run_scenario("hier_between", "between", false, 2, 10);
}

}  // namespace
