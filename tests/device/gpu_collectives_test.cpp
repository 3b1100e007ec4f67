// The device path against host-computed values: every collective, dtype and reduction on CUDA
// memory; on one rank by NCCL, on 2 and 4 ranks sharing one GPU by staging (docs/device.md).
// Skipped with "no CUDA device" where none is present.
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>

#include "device/nccl.hpp"
#include "runtime/communicator_impl.hpp"
#include "tests/device/gpu.hpp"
#include "tests/mp/mp.hpp"

using namespace strata;

namespace {

const size_t kCounts[] = {0, 7, 1031, 65537};

bool on_nccl() {
  const char* forced = std::getenv("STRATA_DEVICE_PATH");
  if (forced && std::string(forced) == "staged") return false;
  return mp::world().size() == 1;  // one GPU here: NCCL serves one rank, staging the rest
}

// The dtypes and reductions of this path: NCCL's, or every one of the host path when staged.
bool served(DataType dt, ReduceOp op) { return !on_nccl() || device::nccl_refuses(dt, op).empty(); }

// Where NCCL serves the call and lacks `dt` or `op`, `call` (given a 7-element input and output)
// must be refused by name before anything is enqueued, and the group go on.
void expect_nccl_refusal(DataType dt, ReduceOp op,
                         const std::function<void(const Buffer&, const Buffer&)>& call) {
  gpu::DeviceMemory in(7 * dtype_size(dt)), out(7 * dtype_size(dt));
  try {
    call(in.view(dt, 7), out.view(dt, 7));
    ADD_FAILURE() << "NCCL took " << dtype_name(dt) << " " << op_name(op);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find(device::nccl_refuses(dt, op)), std::string::npos)
        << e.what();
  }
}

std::vector<uint8_t> pattern(DataType dt, size_t n, int rank, size_t first = 0) {
  auto v = mp::alloc(dt, n);
  mp::fill(v.data(), dt, n, rank, first);
  return v;
}

TEST(GpuCollectives, AllReduceEveryDtypeOpAndSize) {
  STRATA_NEED_GPU();
  auto& w = mp::world();
  for (DataType dt : mp::all_dtypes())
    for (ReduceOp op : mp::all_ops()) {
      if (!served(dt, op)) {
        expect_nccl_refusal(
            dt, op, [&](const Buffer& in, const Buffer& out) { w.all_reduce(in, out, op).wait(); });
        continue;
      }
      std::vector<size_t> counts(std::begin(kCounts), std::end(kCounts));
      if (dt == DataType::f32) counts.push_back((3 << 20) + 5);  // several staging chunks
      for (size_t n : counts) {
        const size_t es = dtype_size(dt);
        gpu::DeviceMemory in(n * es), out(n * es);
        gpu::up(in, pattern(dt, n, w.rank()));
        w.all_reduce(in.view(dt, n), out.view(dt, n), op).wait();
        auto want = mp::alloc(dt, n);
        mp::reference_reduce(want.data(), dt, op, n, w.size());
        EXPECT_EQ(mp::compare(gpu::down(out, n * es).data(), want.data(), dt, n), "")
            << dtype_name(dt) << " " << op_name(op) << " x " << n;
        // In place.
        w.all_reduce(in.view(dt, n), op).wait();
        EXPECT_EQ(mp::compare(gpu::down(in, n * es).data(), want.data(), dt, n), "")
            << "in place: " << dtype_name(dt) << " " << op_name(op) << " x " << n;
      }
    }
}

TEST(GpuCollectives, ReduceScatterAndReduce) {
  STRATA_NEED_GPU();
  auto& w = mp::world();
  const size_t p = size_t(w.size());
  for (DataType dt : mp::all_dtypes())
    for (ReduceOp op : mp::all_ops()) {
      if (!served(dt, op)) {  // one rank on NCCL: the input is one block
        expect_nccl_refusal(dt, op, [&](const Buffer& in, const Buffer& out) {
          w.reduce_scatter(in, out, op).wait();
        });
        expect_nccl_refusal(
            dt, op, [&](const Buffer& in, const Buffer& out) { w.reduce(in, out, op, 0).wait(); });
        continue;
      }
      for (size_t n : kCounts) {
        const size_t es = dtype_size(dt);
        gpu::DeviceMemory in(n * p * es), out(n * es);
        gpu::up(in, pattern(dt, n * p, w.rank()));
        w.reduce_scatter(in.view(dt, n * p), out.view(dt, n), op).wait();
        auto want = mp::alloc(dt, n);
        mp::reference_reduce(want.data(), dt, op, n, w.size(), n * size_t(w.rank()));
        EXPECT_EQ(mp::compare(gpu::down(out, n * es).data(), want.data(), dt, n), "")
            << "reduce_scatter " << dtype_name(dt) << " " << op_name(op) << " x " << n;
        const int root = w.size() - 1;
        gpu::DeviceMemory rout(n * es);
        w.reduce(in.view(dt, n), rout.view(dt, n), op, root).wait();
        if (w.rank() != root) continue;
        mp::reference_reduce(want.data(), dt, op, n, w.size());
        EXPECT_EQ(mp::compare(gpu::down(rout, n * es).data(), want.data(), dt, n), "")
            << "reduce " << dtype_name(dt) << " " << op_name(op) << " x " << n;
      }
    }
}

TEST(GpuCollectives, AllGatherAllToAllBroadcastGatherScatter) {
  STRATA_NEED_GPU();
  auto& w = mp::world();
  const size_t p = size_t(w.size());
  const int root = w.size() - 1;
  for (DataType dt : mp::all_dtypes())
    for (size_t n : kCounts) {
      const size_t es = dtype_size(dt), block = n * es;
      gpu::DeviceMemory small(block), big(block * p), out_big(block * p), out_small(block);
      // all_gather: block r is rank r's.
      gpu::up(small, pattern(dt, n, w.rank()));
      w.all_gather(small.view(dt, n), big.view(dt, n * p)).wait();
      auto got = gpu::down(big, block * p);
      for (size_t r = 0; r < p; ++r)
        EXPECT_EQ(mp::compare(got.data() + r * block, pattern(dt, n, int(r)).data(), dt, n), "")
            << "all_gather " << dtype_name(dt) << " x " << n << " block " << r;
      // all_to_all: block r of the output is block `rank` of rank r's input.
      gpu::up(big, pattern(dt, n * p, w.rank()));
      w.all_to_all(big.view(dt, n * p), out_big.view(dt, n * p)).wait();
      got = gpu::down(out_big, block * p);
      for (size_t r = 0; r < p; ++r)
        EXPECT_EQ(mp::compare(got.data() + r * block,
                              pattern(dt, n, int(r), n * size_t(w.rank())).data(), dt, n),
                  "")
            << "all_to_all " << dtype_name(dt) << " x " << n << " block " << r;
      // broadcast from the last rank, out of place.
      gpu::up(small, pattern(dt, n, w.rank()));
      w.broadcast(small.view(dt, n), out_small.view(dt, n), root).wait();
      EXPECT_EQ(mp::compare(gpu::down(out_small, block).data(), pattern(dt, n, root).data(), dt, n),
                "")
          << "broadcast " << dtype_name(dt) << " x " << n;
      // gather to the last rank.
      w.gather(small.view(dt, n), out_big.view(dt, n * p), root).wait();
      if (w.rank() == root) {
        got = gpu::down(out_big, block * p);
        for (size_t r = 0; r < p; ++r)
          EXPECT_EQ(mp::compare(got.data() + r * block, pattern(dt, n, int(r)).data(), dt, n), "")
              << "gather " << dtype_name(dt) << " x " << n << " block " << r;
      }
      // scatter from the last rank: rank r gets block r of its input.
      gpu::up(big, pattern(dt, n * p, w.rank()));
      w.scatter(big.view(dt, n * p), out_small.view(dt, n), root).wait();
      EXPECT_EQ(mp::compare(gpu::down(out_small, block).data(),
                            pattern(dt, n, root, n * size_t(w.rank())).data(), dt, n),
                "")
          << "scatter " << dtype_name(dt) << " x " << n;
    }
}

TEST(GpuCollectives, AllToAllvUnevenBlocks) {
  STRATA_NEED_GPU();
  auto& w = mp::world();
  const size_t p = size_t(w.size());
  auto count = [](size_t from, size_t to) { return 1 + (from * 7 + to * 3) % 5; };
  std::vector<size_t> sc(p), sd(p), rc(p), rd(p);
  for (size_t r = 0; r < p; ++r) {
    sc[r] = count(size_t(w.rank()), r);
    rc[r] = count(r, size_t(w.rank()));
    sd[r] = r ? sd[r - 1] + sc[r - 1] : 0;
    rd[r] = r ? rd[r - 1] + rc[r - 1] : 0;
  }
  const size_t sends = sd[p - 1] + sc[p - 1], recvs = rd[p - 1] + rc[p - 1];
  const DataType dt = DataType::i32;
  gpu::DeviceMemory in(sends * 4), out(recvs * 4);
  gpu::up(in, pattern(dt, sends, w.rank()));
  w.all_to_allv(in.view(dt, sends), sc, sd, out.view(dt, recvs), rc, rd).wait();
  auto got = gpu::down(out, recvs * 4);
  for (size_t r = 0; r < p; ++r) {
    size_t first = 0;  // where rank r's block for this rank starts in r's input
    for (size_t q = 0; q < size_t(w.rank()); ++q) first += count(r, q);
    EXPECT_EQ(
        mp::compare(got.data() + rd[r] * 4, pattern(dt, rc[r], int(r), first).data(), dt, rc[r]),
        "")
        << "from rank " << r;
  }
}

TEST(GpuCollectives, SendAndReceiveAroundTheRing) {
  STRATA_NEED_GPU();
  auto& w = mp::world();
  if (w.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const size_t n = 100003;
  const DataType dt = DataType::f32;
  gpu::DeviceMemory in(n * 4), out(n * 4);
  gpu::up(in, pattern(dt, n, w.rank()));
  const int next = (w.rank() + 1) % w.size(), prev = (w.rank() + w.size() - 1) % w.size();
  Work r = w.recv(out.view(dt, n), prev);
  Work s = w.send(in.view(dt, n), next);
  s.wait();
  r.wait();
  EXPECT_EQ(mp::compare(gpu::down(out, n * 4).data(), pattern(dt, n, prev).data(), dt, n), "");
}

// send_recv: every rank sends before it receives, in one batch (on NCCL inside one
// ncclGroupStart/End: one rank here, sending to itself; staged on several).
TEST(GpuCollectives, SendRecvBatchRing) {
  STRATA_NEED_GPU();
  auto& w = mp::world();
  const size_t n = 100003;
  const DataType dt = DataType::f32;
  gpu::DeviceMemory in(n * 4), out(n * 4), one(4);
  gpu::up(one, pattern(dt, 1, 0));
  w.all_reduce(one.view(dt, 1), ReduceOp::sum).wait();  // sets up the device path (NCCL or not)
  gpu::up(in, pattern(dt, n, w.rank()));
  const int next = (w.rank() + 1) % w.size(), prev = (w.rank() + w.size() - 1) % w.size();
  std::vector<Work> works = w.send_recv(
      {{PeerOp::send, in.view(dt, n), next, 0}, {PeerOp::recv, out.view(dt, n), prev, 0}});
  for (Work& x : works) x.wait();
  EXPECT_EQ(mp::compare(gpu::down(out, n * 4).data(), pattern(dt, n, prev).data(), dt, n), "");
}

// On NCCL a split group's NCCL communicator comes from its parent's by ncclCommSplit, made
// with the group (a rank passing a negative color takes part and gets nothing); staged groups
// set up at their first device call. Values against the members' inputs either way.
TEST(GpuCollectives, SplitGroupsTakeTheirNcclFromTheParent) {
  STRATA_NEED_GPU();
  auto& w = mp::world();
  const size_t n = 1031;
  const DataType dt = DataType::f32;
  gpu::DeviceMemory in(n * 4), out(n * 4);
  gpu::up(in, pattern(dt, n, w.rank()));
  w.all_reduce(in.view(dt, n), out.view(dt, n), ReduceOp::sum).wait();  // the path set up
  auto check = [&](Communicator& sub, const std::vector<int>& members) {
    EXPECT_EQ(bool(runtime::GroupAccess::of(sub).device), on_nccl()) << sub.name();
    sub.all_reduce(in.view(dt, n), out.view(dt, n), ReduceOp::sum).wait();
    std::vector<float> want(n, 0.0f);
    for (int r : members) {
      for (size_t i = 0; i < n; ++i) want[i] += float(mp::pattern(r, i));
    }
    EXPECT_EQ(mp::compare(gpu::down(out, n * 4).data(), want.data(), dt, n), "") << sub.name();
  };
  std::vector<int> same_parity, all_but_0;
  for (int r = 0; r < w.size(); ++r) {
    if (r % 2 == w.rank() % 2) same_parity.push_back(r);
    if (r != 0) all_but_0.push_back(r);
  }
  Communicator half = w.split(w.rank() % 2, w.rank());
  check(half, same_parity);
  Communicator without_0 = w.split(w.rank() == 0 ? -1 : 0, 0);
  EXPECT_EQ(bool(without_0), w.rank() != 0);
  if (without_0) check(without_0, all_but_0);
  w.barrier().wait();
}

}  // namespace
