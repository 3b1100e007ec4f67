// strata-perf --device cuda over the CUDA runtime, and --compare nccl's raw NCCL.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "device/cuda/nccl_types.hpp"
#include "perf_device.hpp"

namespace perf {
namespace {

void ok(cudaError_t r, const char* what) {
  if (r != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(r));
}
void ok(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(r));
}

// The raw NCCL communicator, made at the first comparison: none where ranks share a GPU.
struct RawNccl {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

std::optional<RawNccl> make_raw(strata::Communicator& c) {
  int dev = 0;
  ok(cudaGetDevice(&dev), "cudaGetDevice");
  cudaDeviceProp prop{};
  ok(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  std::vector<char> mine(prop.uuid.bytes, prop.uuid.bytes + 16), all(16 * size_t(c.size()));
  c.all_gather(strata::Buffer{mine.data(), 16, strata::DataType::u8},
               strata::Buffer{all.data(), all.size(), strata::DataType::u8})
      .wait();
  for (int i = 0; i < c.size(); ++i)
    for (int j = 0; j < i; ++j)
      if (!std::memcmp(&all[16 * size_t(i)], &all[16 * size_t(j)], 16)) return std::nullopt;
  ncclUniqueId id;
  if (c.rank() == 0) ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
  c.broadcast(strata::Buffer{&id, sizeof id, strata::DataType::u8}, 0).wait();
  RawNccl r;
  ok(ncclCommInitRank(&r.comm, c.size(), id, c.rank()), "ncclCommInitRank");
  ok(cudaStreamCreate(&r.stream), "cudaStreamCreate");
  return r;
}

// Issues `c` once on raw NCCL; false where NCCL has no such call.
bool issue(const RawNccl& r, const Case& c, strata::Buffer in, strata::Buffer out) {
  // Strata's own mapping of types and reductions (unit-tested: tests/device/nccl_types_test.cpp).
  const auto t = strata::device::nccl_dtype(c.dtype);
  const auto red = strata::device::nccl_op(c.op);
  if (!t || !red) return false;
  const ncclRedOp_t op = *red;
  switch (c.coll) {
    case Coll::all_reduce:
      ok(ncclAllReduce(in.data, out.data, in.count, *t, op, r.comm, r.stream), "ncclAllReduce");
      return true;
    case Coll::all_gather:
      ok(ncclAllGather(in.data, out.data, in.count, *t, r.comm, r.stream), "ncclAllGather");
      return true;
    case Coll::reduce_scatter:
      ok(ncclReduceScatter(in.data, out.data, out.count, *t, op, r.comm, r.stream),
         "ncclReduceScatter");
      return true;
    case Coll::broadcast:
      ok(ncclBroadcast(in.data, out.data, out.count, *t, c.root, r.comm, r.stream),
         "ncclBroadcast");
      return true;
    case Coll::reduce:
      ok(ncclReduce(in.data, out.data, in.count, *t, op, c.root, r.comm, r.stream), "ncclReduce");
      return true;
    case Coll::all_to_all: {
      const size_t block = in.count / size_t(c.n), bytes = block * strata::dtype_size(c.dtype);
      ok(ncclGroupStart(), "ncclGroupStart");
      for (int p = 0; p < c.n; ++p) {
        ok(ncclSend(static_cast<uint8_t*>(in.data) + p * bytes, block, *t, p, r.comm, r.stream),
           "ncclSend");
        ok(ncclRecv(static_cast<uint8_t*>(out.data) + p * bytes, block, *t, p, r.comm, r.stream),
           "ncclRecv");
      }
      ok(ncclGroupEnd(), "ncclGroupEnd");
      return true;
    }
    default:
      return false;
  }
}

}  // namespace

DeviceBuffers::DeviceBuffers(size_t a_bytes, size_t b_bytes) {
  int count = 0;
  ok(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count == 0) throw std::runtime_error("--device cuda: no CUDA device on this machine");
  const char* local = std::getenv("LOCAL_RANK");
  if (!local) local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  device_ = (local ? std::atoi(local) : 0) % count;
  ok(cudaSetDevice(device_), "cudaSetDevice");
  ok(cudaMalloc(&a_, a_bytes), "cudaMalloc");
  ok(cudaMalloc(&b_, b_bytes), "cudaMalloc");
}

DeviceBuffers::~DeviceBuffers() {
  cudaFree(a_);
  cudaFree(b_);
}

strata::Buffer DeviceBuffers::mirror(strata::Buffer host, std::span<const uint8_t> a,
                                     std::span<const uint8_t> b) const {
  const auto* p = static_cast<const uint8_t*>(host.data);
  const bool in_a = p >= a.data() && p <= a.data() + a.size();
  uint8_t* base = in_a ? a_ + (p - a.data()) : b_ + (p - b.data());
  return strata::Buffer{base, host.count, host.dtype, strata::MemoryKind::cuda};
}

std::string DeviceBuffers::name() const {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device_) != cudaSuccess) return "?";
  return std::string(prop.name) + " (device " + std::to_string(device_) + ")";
}

void copy_memory(void* dst, const void* src, size_t bytes) {
  ok(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
  ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

std::optional<double> time_nccl(strata::Communicator& comm, const Case& c, strata::Buffer in,
                                strata::Buffer out, int warmup, int iters) {
  static std::optional<RawNccl> raw = make_raw(comm);  // collective: every rank's first call
  if (!raw) return std::nullopt;
  if (!issue(*raw, c, in, out)) return std::nullopt;
  for (int i = 1; i < warmup; ++i) issue(*raw, c, in, out);
  ok(cudaStreamSynchronize(raw->stream), "cudaStreamSynchronize");
  comm.barrier().wait();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) issue(*raw, c, in, out);
  ok(cudaStreamSynchronize(raw->stream), "cudaStreamSynchronize");
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
         iters;
}

}  // namespace perf
