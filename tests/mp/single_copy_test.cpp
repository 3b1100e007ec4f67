// Single copy (shm/writer_input.hpp): a writer leaves its input unstaged and its peers copy their
// blocks out of its memory with the kernel. Learned, every kind of operation of 64 KiB and more
// measures single copy once it is offered (its fourth operation of a size), so the twenty calls of
// each kind below run some unstaged wherever the kernel lets the ranks read each other; every
// result is checked element by element. CTest's mp_single_copy_np* force it for every call
// (STRATA_SHM_WRITE_MODE=single_copy), with the collective and symmetric-buffer tests; there the
// uneven all_to_allv has its copies shared out between senders and receivers, and broadcasts
// (not learned) are read out of the root's memory too.
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

#include "mp.hpp"
#include "runtime/communicator_impl.hpp"

using namespace strata;

namespace {

// Element i of what rank `from` sends rank `to` in call `call` (all_gather: to = 0).
int32_t value(int from, int to, size_t i, int call) {
  return int32_t(from * 1000003 + to * 7919 + i * 3 + size_t(call) * 104729);
}

// Elements rank i sends rank j in the all_to_allv: uneven, none from rank 1 to rank 0.
size_t sent(int i, int j, size_t base) {
  return i == 1 && j == 0 ? 0 : base + size_t(j) * 1000 + size_t(i) * 17;
}

// One all_to_allv of sent(i, j, base) elements, every element checked.
void uneven_all_to_allv(Communicator& g, size_t base, int call) {
  const int n = g.size(), r = g.rank();
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  for (int j = 0; j < n; ++j) {
    sc[j] = sent(r, j, base), rc[j] = sent(j, r, base);
    sd[j] = j == 0 ? 0 : sd[j - 1] + sc[j - 1], rd[j] = j == 0 ? 0 : rd[j - 1] + rc[j - 1];
  }
  std::vector<int32_t> in(sd[n - 1] + sc[n - 1]), out(rd[n - 1] + rc[n - 1], -1);
  for (int j = 0; j < n; ++j) {
    for (size_t i = 0; i < sc[j]; ++i) in[sd[j] + i] = value(r, j, i, call);
  }
  g.all_to_allv(buffer(in), sc, sd, buffer(out), rc, rd).wait();
  for (int j = 0; j < n; ++j) {
    for (size_t i = 0; i < rc[j]; ++i) {
      ASSERT_EQ(out[rd[j] + i], value(j, r, i, call)) << "v from " << j << " " << i;
    }
  }
}

// Makes process_vm_writev fail with EPERM in every thread of this process from now on, as a
// container's seccomp profile may while it allows process_vm_readv. False where the kernel has
// no seccomp filters.
bool forbid_process_writes() {
  sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_writev, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(std::size(code)), code};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) == 0;
}

}  // namespace

// Run alone (mp_single_copy_no_writes_np3: the filter stays with the process), single copy
// forced. Rank 1 may read its peers' memory but not write it, so the balanced all_to_allv,
// which writes, must not be offered to any rank: staged, every element right, no error.
TEST(SingleCopy, DISABLED_NotOfferedWhereARankMayReadButNotWrite) {
  const int me = mp::world().rank();
  std::vector<int32_t> installed{me != 1 || forbid_process_writes()};
  mp::world().all_reduce(buffer(installed), ReduceOp::min).wait();
  if (!installed[0]) GTEST_SKIP() << "this kernel has no seccomp filters";
  auto g = mp::world().split(0, me);  // a new segment, probed under the filter
  shm::Segment* s = runtime::GroupAccess::of(g).segment();
  ASSERT_NE(s, nullptr) << "needs 2 or more ranks on one node";
  for (int call = 0; call < 3; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    ASSERT_NO_FATAL_FAILURE(uneven_all_to_allv(g, 20000, call));
  }
  EXPECT_FALSE(s->single_copy_possible());
  EXPECT_EQ(s->process_reads + s->process_writes, 0u) << "rank " << g.rank();
}

TEST(SingleCopy, AllGatherAllToAllAndAllToAllvReadOutOfThePeersMemory) {
  auto g = mp::world().split(0, mp::world().rank());
  shm::Segment* s = runtime::GroupAccess::of(g).segment();
  if (!s) GTEST_SKIP() << "needs a shared segment (2 or more ranks on one node)";
  const int n = g.size(), r = g.rank();
  const size_t count = 70000;  // 280 KB a block: two chunks, and learned (64 KiB and up)
  const uint64_t before = s->process_reads, writes_before = s->process_writes;
  uint64_t broadcast_reads = 0;
  const bool forced = config().shm_write_mode == ShmWriteMode::single_copy;
  // Another mode forced (STRATA_SHM_WRITE_MODE=ordinary or streaming): every call is staged.
  const bool staged = !forced && config().shm_write_mode != ShmWriteMode::learn;
  for (int call = 0; call < 20; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    std::vector<int32_t> in(count * n), out(count * n, -1);
    for (size_t i = 0; i < count; ++i) in[i] = value(r, 0, i, call);
    g.all_gather(Buffer{in.data(), count, DataType::i32}, buffer(out)).wait();
    for (int j = 0; j < n; ++j) {
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(out[size_t(j) * count + i], value(j, 0, i, call)) << "block " << j << " " << i;
      }
    }
    for (int j = 0; j < n; ++j) {
      for (size_t i = 0; i < count; ++i) in[size_t(j) * count + i] = value(r, j, i, call);
    }
    std::fill(out.begin(), out.end(), -1);
    g.all_to_all(buffer(in), buffer(out)).wait();
    for (int j = 0; j < n; ++j) {
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(out[size_t(j) * count + i], value(j, r, i, call)) << "from " << j << " " << i;
      }
    }
    ASSERT_NO_FATAL_FAILURE(uneven_all_to_allv(g, count / 4, call));
    const int root = call % n;
    std::vector<int32_t> b(count, -1);
    if (r == root) {
      for (size_t i = 0; i < count; ++i) b[i] = value(root, n, i, call);
    }
    const uint64_t reads = s->process_reads;
    g.broadcast(buffer(b), root).wait();
    broadcast_reads += s->process_reads - reads;
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(b[i], value(root, n, i, call)) << "broadcast from " << root << " " << i;
    }
  }
  // A broadcast is not learned (staged unless forced, RESULTS.md "Broadcast"); forced into single
  // copy, it is one read by each other rank in every call.
  std::vector<uint64_t> bcast{broadcast_reads};
  g.all_reduce(buffer(bcast), ReduceOp::sum).wait();
  EXPECT_EQ(bcast[0], s->single_copy_possible() && forced ? uint64_t(20 * (n - 1)) : 0u);
  // An all_to_allv in single copy on every rank has its copies shared out: the rank that
  // receives least writes part of its block into the busier one (balance()). Forced, that is
  // every call; learned, at least the one that measures single copy (the others follow rank 0).
  std::vector<uint64_t> writes{s->process_writes - writes_before};
  g.all_reduce(buffer(writes), ReduceOp::sum).wait();
  if (s->single_copy_possible() && !staged && (forced || !s->oversubscribed())) {
    EXPECT_GE(writes[0], forced ? 20u : 1u) << "no rank wrote into a peer's output";
  }
  if (staged) {
    EXPECT_EQ(s->process_reads - before, 0u) << "a forced staged mode read a peer's memory";
    EXPECT_EQ(writes[0], 0u) << "a forced staged mode wrote into a peer's memory";
  } else if (!s->single_copy_possible()) {
    std::printf("rank %d: the kernel does not let these ranks read each other: staged only\n", r);
  } else if (!s->oversubscribed()) {  // more ranks than cores learn from 4 MiB only
    // Each kind measured single copy at least once: a block from every peer each time.
    EXPECT_GE(s->process_reads - before, uint64_t(3 * (n - 1)));
  }
}

// Out of place from 1 MiB (4 MiB with more ranks than cores), a broadcast's root copies each chunk
// to its output and the others read it from there, a chunk at a time while the root copies the next
// (shm/data_movement.cpp). Every call sends new values, so a chunk read before the root wrote it
// fails; the root's input stays.
TEST(SingleCopy, OutOfPlaceBroadcastReadsEachChunkFromTheRootsOutput) {
  auto g = mp::world().split(0, mp::world().rank());
  shm::Segment* s = runtime::GroupAccess::of(g).segment();
  if (!s) GTEST_SKIP() << "needs a shared segment (2 or more ranks on one node)";
  const int n = g.size(), r = g.rank();
  const size_t count = 1100000;  // 4.4 MB: 16 whole chunks of 256 KiB and part of another
  const uint64_t chunks = (count * 4 + s->chunk_bytes() - 1) / s->chunk_bytes();
  uint64_t before = 0;
  constexpr int kCalls = 10;
  for (int call = 0; call < kCalls; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    const int root = call % n;
    std::vector<int32_t> in(count, -2), out(count, -1);
    if (r == root) {
      for (size_t i = 0; i < count; ++i) in[i] = value(root, n, i, call);
    }
    g.broadcast(buffer(in), buffer(out), root).wait();
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(out[i], value(root, n, i, call)) << "broadcast from " << root << " " << i;
      ASSERT_EQ(in[i], r == root ? value(root, n, i, call) : -2) << "input changed at " << i;
    }
    // Single copy is offered once every rank has probed its peers: by the end of the first call.
    if (call == 0) before = s->process_reads;
  }
  // Relayed: a read per chunk by every other rank; forced single copy reads the root's whole
  // input at once; another forced mode, or no single copy, stages.
  std::vector<uint64_t> reads{s->process_reads - before};
  g.all_reduce(buffer(reads), ReduceOp::sum).wait();
  const ShmWriteMode mode = config().shm_write_mode;
  uint64_t want = 0;
  if (s->single_copy_possible() && mode == ShmWriteMode::learn) want = chunks;
  if (s->single_copy_possible() && mode == ShmWriteMode::single_copy) want = 1;
  EXPECT_EQ(reads[0], want * (kCalls - 1) * uint64_t(n - 1));
}
