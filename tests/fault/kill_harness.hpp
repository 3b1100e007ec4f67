// The kill tests' harness: launches four strata-fault-rank processes (tests/fault/fault_rank.cpp)
// the torchrun way, kills or stops one, reaps the rest, and checks that every survivor failed in
// time naming the victim and that nothing was left behind. kill_test.cpp and
// job_failure_test.cpp hold the scenarios.
#pragma once

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

namespace kill_harness {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr int kRanks = 4;
constexpr int kTimeoutSeconds = 3;  // STRATA_TIMEOUT of the ranks
constexpr auto kGrace = 5s;         // the bound: timeout + 5 s

inline int free_port() {
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

inline std::set<std::string> entries(const char* dir) {
  std::set<std::string> s;
  for (const auto& e : fs::directory_iterator(dir)) s.insert(e.path().filename().string());
  return s;
}

inline std::string slurp(const fs::path& p) {
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
inline void set_rank_env(int r, const std::string& port, int timeout_seconds) {
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
inline Job launch(const std::string& mode, const fs::path& dir, int ranks_per_node,
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

inline bool all_ready(const Job& job, Clock::duration limit) {
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
inline bool reap(Job& job, Clock::time_point until) {
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
inline bool reap_all_but(Job& job, int spared, Clock::time_point until) {
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

inline int reps(int fallback) {
  const char* v = std::getenv("STRATA_KILL_REPS");
  return v ? std::atoi(v) : fallback;
}

// Every survivor of `job` ended by `killed` + `bound` with exit code `code`, its log holding
// `names_victim`.
inline void check_survivors(const Job& job, int victim, Clock::time_point killed, bool all_ended,
                            std::chrono::milliseconds delay, int code,
                            const std::string& names_victim,
                            Clock::duration bound = std::chrono::seconds(kTimeoutSeconds) +
                                                    kGrace) {
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
inline void check_nothing_left(const Job& job, const std::set<std::string>& shm_before,
                               const std::set<std::string>& tmp_before) {
  for (pid_t p : job.pids) EXPECT_NE(::kill(p, 0), 0) << "process " << p << " is still there";
  EXPECT_EQ(entries("/dev/shm"), shm_before) << "files left in /dev/shm";
  EXPECT_EQ(entries("/tmp"), tmp_before) << "files left in /tmp";
}

// One scenario: `reps` jobs, each losing a random rank at a random moment.
inline void run_scenario(const std::string& name, const std::string& mode, bool in_start_up,
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

}  // namespace kill_harness
