// Stream ordering, host and device calls on one communicator, and a peer that never comes, on
// CUDA memory. Skipped with "no CUDA device" where none is present.
#include <chrono>
#include <thread>

#include "tests/device/gpu.hpp"
#include "tests/mp/mp.hpp"

using namespace strata;

namespace {

void CUDART_CB sleep_50ms(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }

TEST(GpuStreams, CallsOrderOnTheCallersStreamWithoutASynchronise) {
  STRATA_NEED_GPU();
  auto& w = mp::world();
  const size_t n = 1 << 20, bytes = n * 4;
  const DataType dt = DataType::f32;
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void *src = nullptr, *dst = nullptr;
  CUDA_OK(cudaMallocHost(&src, bytes));
  CUDA_OK(cudaMallocHost(&dst, bytes));
  mp::fill(src, dt, n, w.rank());
  gpu::DeviceMemory in(bytes), out(bytes);
  CUDA_OK(cudaMemset(in.get(), 0, bytes));
  CUDA_OK(cudaMemset(out.get(), 0, bytes));
  CUDA_OK(cudaDeviceSynchronize());
  // The input is written on the stream 50 ms late: a call not ordered after it reads zeros.
  CUDA_OK(cudaLaunchHostFunc(s, sleep_50ms, nullptr));
  CUDA_OK(cudaMemcpyAsync(in.get(), src, bytes, cudaMemcpyHostToDevice, s));
  Work done = w.on_stream(s).all_reduce(in.view(dt, n), out.view(dt, n), ReduceOp::sum);
  // Read on the stream, before anyone waits on the Work.
  CUDA_OK(cudaMemcpyAsync(dst, out.get(), bytes, cudaMemcpyDeviceToHost, s));
  CUDA_OK(cudaStreamSynchronize(s));
  done.wait();
  auto want = mp::alloc(dt, n);
  mp::reference_reduce(want.data(), dt, ReduceOp::sum, n, w.size());
  EXPECT_EQ(mp::compare(dst, want.data(), dt, n), "");
  cudaFreeHost(src);
  cudaFreeHost(dst);
  cudaStreamDestroy(s);
}

TEST(GpuStreams, HostAndDeviceCallsAlternateOnOneCommunicator) {
  STRATA_NEED_GPU();
  auto& w = mp::world();
  const size_t n = 4099;
  const DataType dt = DataType::i32;
  gpu::DeviceMemory d(n * 4);
  auto want = mp::alloc(dt, n);
  mp::reference_reduce(want.data(), dt, ReduceOp::sum, n, w.size());
  for (int round = 0; round < 3; ++round) {
    auto h = mp::alloc(dt, n);
    mp::fill(h.data(), dt, n, w.rank());
    w.all_reduce(mp::view(h, dt), ReduceOp::sum).wait();
    EXPECT_EQ(mp::compare(h.data(), want.data(), dt, n), "") << "host, round " << round;
    mp::fill(h.data(), dt, n, w.rank());
    gpu::up(d, h);
    w.all_reduce(d.view(dt, n), ReduceOp::sum).wait();
    EXPECT_EQ(mp::compare(gpu::down(d, n * 4).data(), want.data(), dt, n), "")
        << "device, round " << round;
  }
}

TEST(GpuStreams, APeerThatNeverCallsFailsTheOthersAtTheDeadline) {
  STRATA_NEED_GPU();
  auto& w = mp::world();
  if (w.size() < 2) GTEST_SKIP() << "needs 2 ranks (one GPU: NCCL serves only one)";
  CommOptions o;
  o.name = "late";
  o.timeout = std::chrono::milliseconds(2000);
  Communicator late = w.split(0, w.rank(), o);
  gpu::DeviceMemory d(64 * 4);
  late.all_reduce(d.view(DataType::f32, 64), ReduceOp::sum).wait();  // the path is set up
  if (w.rank() == 0) {
    const auto start = std::chrono::steady_clock::now();
    mp::expect_error([&] { late.all_reduce(d.view(DataType::f32, 64), ReduceOp::sum).wait(); },
                     ErrorCode::timeout, {"group late"});
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  }
  w.barrier().wait();
}

}  // namespace
