// kill -9 one of four ranks and check that the three survivors fail, each naming the dead rank,
// within STRATA_TIMEOUT + 5 s, never with wrong data, and that nothing is left behind (processes,
// files in /dev/shm or /tmp). Four moments, 20 repetitions each (STRATA_KILL_REPS), random victim
// and random kill time:
//   Collective: all ranks in back-to-back 1 MiB all-reduces (the others wait in one).
//   Dispatch:   back-to-back all_to_allv of uneven blocks (a MoE layer's), on the segment (also
//               in single copy) and on the network path (10 repetitions each).
//   Broadcast:  back-to-back 4 MiB out-of-place broadcasts, relayed (10 repetitions).
//   Between:    small all-reduces with 30 ms of compute between them (the kill lands outside).
//   Start-up:   within 100 ms of the victim joining the job's store (its node record is there),
//               while the ranks meet (a job here is ready after 60-80 ms). The ranks' timeout is
//               60 s, yet every survivor must fail within 2 s naming the victim: the store tells
//               the ranks waiting for it that it is gone (issue 22). 30 repetitions.
// Device: the collective in GPU memory (skipped without a GPU; 10 repetitions),
// and Collective and Between again on two emulated nodes of two ranks (STRATA_NODE_ID), the
// all-reduce forced hierarchical: a survivor waiting in its node's shared memory for a neighbour
// must learn of a death that neighbour saw on its rail (10 repetitions each; UCX on TCP, as between
// machines: a peer killed in the middle of a UCX shared-memory (CMA) read makes UCX abort the
// reader, see docs/architecture.md). Every rank is ready after its first collective: a peer that
// dies while UCX 1.13 is still connecting to it over TCP makes UCX abort the survivor
// (architecture.md, "Connecting"), so the hierarchical scenarios kill only once the groups are
// connected. job_failure_test.cpp adds the fixed cases: a stopped rank, a rank that gives up in
// setup, two jobs on one port. The ranks are tests/fault/fault_rank.cpp, launched the torchrun way
// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) by this driver, which unlike mpirun lets the
// survivors finish.
#include <random>

#include "tests/fault/fault_device.hpp"
#include "tests/fault/kill_harness.hpp"

using namespace kill_harness;

namespace {

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

TEST(KillRank, DuringAllReduce) { run_scenario("all_reduce", "collective", false); }
// The network path (STRATA_SHM=0, UCX without CMA by default): a survivor's transport error
// ("Connection reset by remote peer") is the echo of the death; each survivor names the dead
// rank, not none, nor a survivor that reported it and exited (issue 33).
TEST(KillRank, DuringAllReduceOnTheNetworkPath) {
  ::setenv("STRATA_SHM", "0", 1);  // inherited by the ranks
  run_scenario("all_reduce_net", "collective", false, 0, 10);
  ::unsetenv("STRATA_SHM");
}
// A MoE layer's token dispatch (all_to_allv of uneven blocks) loses a rank: on the segment, and
// on the network path.
TEST(KillRank, DuringDispatch) { run_scenario("dispatch", "dispatch", false, 0, 10); }
TEST(KillRank, DuringDispatchOnTheNetworkPath) {
  ::setenv("STRATA_SHM", "0", 1);  // inherited by the ranks
  run_scenario("dispatch_net", "dispatch", false, 0, 10);
  ::unsetenv("STRATA_SHM");
}
// The same in single copy (each reader copies its block straight out of the writer's memory,
// which then waits until every reader has): a writer that dies under a reader's
// process_vm_readv, and a reader that dies while its writer waits for it.
TEST(KillRank, DuringDispatchInSingleCopy) {
  ::setenv("STRATA_SHM_WRITE_MODE", "single_copy", 1);  // inherited by the ranks
  run_scenario("dispatch_single_copy", "dispatch", false, 0, 10);
  ::unsetenv("STRATA_SHM_WRITE_MODE");
}
// Out-of-place broadcasts, relayed (the readers copy each chunk out of the root's output while
// the root waits for them): a root that dies under its readers' copies, a reader that dies
// while the root waits for it.
TEST(KillRank, DuringRelayedBroadcast) { run_scenario("broadcast", "broadcast", false, 0, 10); }
// A rank dies while the others are in an all-reduce of GPU memory: on a one-GPU machine the four
// ranks share it and the call is staged (its host legs see the death); skipped without a GPU.
TEST(KillRank, DuringDeviceAllReduce) {
  if (!fault_device::present()) GTEST_SKIP() << "no CUDA device";
  run_scenario("device_all_reduce", "device", false, 0, 10);
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
