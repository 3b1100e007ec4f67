// Jobs that fail without a kill -9 (kill_harness.hpp launches them): a rank stopped, not dead; a
// rank that gives up in setup because of another; two jobs on one port and token.
#include <random>

#include "tests/fault/kill_harness.hpp"

using namespace kill_harness;

namespace {

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

// Rank 1 finishes its part of setup, reports that rank 2 died and exits while the others wait
// for it in the barrier that ends setup; rank 2 lives. Every other rank must name rank 2, the
// report, not rank 1, the process gone from the table (kill_test once caught rank 3 naming rank 1
// when rank 1 had given up in setup because of rank 2).
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

}  // namespace
