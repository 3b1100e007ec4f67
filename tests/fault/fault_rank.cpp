// One rank of the kill tests (kill_test.cpp starts four of these through the torchrun-style
// environment and kills one). Joins the job, runs one collective (so every connection a
// collective uses is made: see "Connecting" in docs/architecture.md), says it is ready, then
// runs collectives until one fails; a failure prints the error and the culprit's rank and exits 3,
// so the driver can check that every survivor named the rank it killed.
//
//   strata-fault-rank MODE READY_FILE
//   MODE: collective (back-to-back 1 MiB all-reduces), between (small all-reduces with 30 ms of
//         "compute" between them, where a kill usually lands), gives_up_in_setup (as collective,
//         but rank 1 sets up its part of the world, then acts as if it had seen rank 2 die: it
//         reports rank 2 in the store and exits 3 while the others wait for it in the barrier
//         that ends setup), dispatch (back-to-back all_to_allv of uneven blocks, as a MoE
//         layer's token dispatch; the busiest rank receives about 256 KiB from each), broadcast
//         (back-to-back 4 MiB out-of-place broadcasts, the root in turn), device
//         (as collective, the data in GPU memory: the device path, staged where ranks share a
//         GPU; exits 5 where there is none)
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/await_rank.hpp"
#include "bootstrap/job_env.hpp"
#include "runtime/communicator_impl.hpp"
#include "strata/strata.hpp"
#include "tests/fault/fault_device.hpp"

namespace {

// Rank 1 of gives_up_in_setup: what a rank does whose setup fails on another's death, after its
// addresses are published (so the others get as far as the barrier).
int give_up_in_setup() {
  strata::bootstrap::JobEnv env = strata::bootstrap::read_job_env();
  auto store = std::make_shared<strata::PrefixStore>(strata::bootstrap::connect_store(env),
                                                     strata::CommOptions{}.name);
  strata::Communicator::Impl mine(store, env.rank, env.size, {});
  const strata::Error seen(strata::ErrorCode::peer_failure,
                           {.rank = env.rank, .group = "world", .op = "init", .peer = 2},
                           "rank 2 died (as if seen by rank 1 in setup)");
  strata::bootstrap::report_failure(*store, seen);
  std::fprintf(stderr, "%s\nculprit=2\n", seen.what());
  return 3;
}

// Elements rank `from` sends rank `to` in a dispatch, and its value k of them in iteration `it`.
size_t tokens(int from, int to) { return size_t(4096 * (4 - to) + 17 * from); }
int32_t token(int from, int to, size_t k, int64_t it) {
  return int32_t(from * 1000003 + to * 1009 + int64_t(k) + it) % 1000000;
}

// Runs dispatches until one fails; a survivor must never see wrong data, only an error.
int dispatch(strata::Communicator& world, const char* ready) {
  const int n = world.size(), me = world.rank();
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  for (int j = 1; j <= n; ++j) {
    if (j < n) sd[j] = sd[j - 1] + tokens(me, j - 1), rd[j] = rd[j - 1] + tokens(j - 1, me);
    sc[j - 1] = tokens(me, j - 1), rc[j - 1] = tokens(j - 1, me);
  }
  std::vector<int32_t> in(sd[n - 1] + sc[n - 1]), out(rd[n - 1] + rc[n - 1]);
  for (int64_t it = 0;; ++it) {
    for (int j = 0; j < n; ++j)
      for (size_t k = 0; k < sc[j]; ++k) in[sd[j] + k] = token(me, j, k, it);
    world.all_to_allv(strata::buffer(in), sc, sd, strata::buffer(out), rc, rd).wait();
    if (it == 0) std::ofstream(ready) << ::getpid() << "\n";
    for (int j = 0; j < n; ++j) {
      for (size_t k = 0; k < rc[j]; ++k) {
        if (out[rd[j] + k] != token(j, me, k, it)) {
          std::fprintf(stderr, "strata-fault-rank: WRONG token %zu from rank %d in dispatch %lld\n",
                       k, j, (long long)it);
          return 4;
        }
      }
    }
  }
}

// Runs out-of-place broadcasts of 4 MiB from each rank in turn until one fails: relayed on the
// segment (the readers copy each chunk out of the root's output; the root waits for them).
int broadcasts(strata::Communicator& world, const char* ready) {
  const int n = world.size(), me = world.rank();
  std::vector<int32_t> in(1u << 20), out(in.size());
  for (int64_t it = 0;; ++it) {
    const int root = int(it % n);
    for (size_t k = 0; k < in.size(); ++k) in[k] = token(me, 0, k, it);
    world.broadcast(strata::buffer(in), strata::buffer(out), root).wait();
    if (it == 0) std::ofstream(ready) << ::getpid() << "\n";
    for (size_t k = 0; k < out.size(); ++k) {
      if (out[k] != token(root, 0, k, it)) {
        std::fprintf(stderr, "strata-fault-rank: WRONG value %zu from root %d in broadcast %lld\n",
                     k, root, (long long)it);
        return 4;
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s collective|between|dispatch|broadcast|device READY_FILE\n",
                 argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const bool between = mode == "between";
  try {
    if (mode == "gives_up_in_setup" && strata::bootstrap::read_job_env().rank == 1) {
      return give_up_in_setup();
    }
    auto world = strata::Communicator::from_env();
    if (mode == "dispatch") return dispatch(world, argv[2]);
    if (mode == "broadcast") return broadcasts(world, argv[2]);
    const size_t count = between ? 1024 : (1u << 18);
    std::vector<int32_t> data(count);
    // The device mode reduces a copy of `data` in GPU memory.
    const bool device = mode == "device";
    void* gpu = device ? fault_device::alloc(count * sizeof(int32_t)) : nullptr;
    const strata::Buffer reduced =
        device ? strata::Buffer{gpu, count, strata::DataType::i32, strata::MemoryKind::cuda}
               : strata::buffer(data);
    auto all_reduce = [&] {
      if (device) fault_device::to_device(gpu, data.data(), count * sizeof(int32_t));
      world.all_reduce(reduced, strata::ReduceOp::sum).wait();
      if (device) fault_device::to_host(data.data(), gpu, count * sizeof(int32_t));
    };
    all_reduce();
    std::ofstream(argv[2]) << ::getpid() << "\n";
    for (int64_t iter = 0;; ++iter) {
      for (size_t i = 0; i < count; ++i) data[i] = int32_t((i + iter) % 1000) + world.rank();
      all_reduce();
      // A survivor must never see wrong data, only an error.
      const int32_t ranks = world.size() * (world.size() - 1) / 2;
      for (size_t i = 0; i < count; ++i) {
        if (data[i] != world.size() * int32_t((i + iter) % 1000) + ranks) {
          std::fprintf(stderr, "strata-fault-rank: WRONG value at %zu in iteration %lld\n", i,
                       (long long)iter);
          return 4;
        }
      }
      if (between) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "%s\nculprit=%d\n", e.what(), e.where().peer);
    return 3;
  }
}
