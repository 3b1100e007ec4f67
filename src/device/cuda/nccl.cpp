// device::Nccl: one blocking NCCL communicator, created against the deadline.
#include "device/nccl.hpp"

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "device/cuda/nccl_api.hpp"
#include "device/cuda/nccl_types.hpp"

namespace strata::device {
namespace {

ncclComm_t as_comm(void* c) { return static_cast<ncclComm_t>(c); }
cudaStream_t as_stream(Stream s) { return static_cast<cudaStream_t>(s); }

}  // namespace

NcclId nccl_unique_id(const ErrorContext& where) {
  static_assert(sizeof(ncclUniqueId) == sizeof(NcclId));
  const NcclApi& api = nccl_api(where);
  ncclUniqueId id;
  const ncclResult_t r = api.get_unique_id(&id);
  if (r != ncclSuccess) {
    throw Error(ErrorCode::transport, where,
                nccl_failure("ncclGetUniqueId", api.get_error_string(r), nullptr));
  }
  NcclId out;
  std::memcpy(out.data(), &id, sizeof id);
  return out;
}

Nccl::Nccl(const NcclId& id, int rank, int size, Clock::time_point deadline,
           const ErrorContext& where)
    : where_(where) {
  const NcclApi& api = nccl_api(where);
  // A blocking communicator, made on a helper thread that this one waits for until the
  // deadline: a rank that never joins fails the others instead of hanging them. (A non-blocking
  // communicator would bound the wait too, but NCCL launches each of its calls from a thread it
  // creates for the call, group.cc: ~5 us a call, measured on an H200.)
  struct Init {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    ncclResult_t result = ncclInternalError;
    ncclComm_t comm = nullptr;
  };
  auto init = std::make_shared<Init>();
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) cudaGetLastError();
  ncclUniqueId uid;
  std::memcpy(&uid, id.data(), sizeof uid);
  std::thread([init, uid, rank, size, device, &api] {
    cudaSetDevice(device);
    ncclComm_t comm = nullptr;
    const ncclResult_t r = api.comm_init_rank(&comm, size, uid, rank);
    std::lock_guard<std::mutex> l(init->mu);
    init->result = r;
    init->comm = comm;
    init->done = true;
    init->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> l(init->mu);
  if (!init->cv.wait_until(l, deadline, [&] { return init->done; })) {
    // The helper stays blocked in NCCL; it ends with the process.
    throw Error(ErrorCode::timeout, where_,
                "ncclCommInitRank still in progress at the deadline (a rank that never joined "
                "the NCCL communicator)");
  }
  comm_ = init->comm;
  if (init->result != ncclSuccess) {
    throw Error(ErrorCode::transport, where_,
                nccl_failure("ncclCommInitRank", api.get_error_string(init->result),
                             api.get_last_error(nullptr)));
  }
}

Nccl::~Nccl() {
  if (comm_ && !aborted_) nccl_api(where_).comm_destroy(as_comm(comm_));
}

void Nccl::settle(const char* call, int result) {
  const auto r = ncclResult_t(result);
  if (r == ncclSuccess) return;
  const NcclApi& api = nccl_api(where_);
  throw Error(ErrorCode::transport, where_,
              nccl_failure(call, api.get_error_string(r),
                           comm_ ? api.get_last_error(as_comm(comm_)) : nullptr));
}

void Nccl::all_reduce(const void* in, void* out, size_t count, DataType dt, ReduceOp op, Stream s) {
  settle("ncclAllReduce", nccl_api(where_).all_reduce(in, out, count, *nccl_dtype(dt), *nccl_op(op),
                                                      as_comm(comm_), as_stream(s)));
}

void Nccl::reduce(const void* in, void* out, size_t count, DataType dt, ReduceOp op, int root,
                  Stream s) {
  settle("ncclReduce", nccl_api(where_).reduce(in, out, count, *nccl_dtype(dt), *nccl_op(op), root,
                                               as_comm(comm_), as_stream(s)));
}

void Nccl::broadcast(const void* in, void* out, size_t count, DataType dt, int root, Stream s) {
  settle("ncclBroadcast", nccl_api(where_).broadcast(in, out, count, *nccl_dtype(dt), root,
                                                     as_comm(comm_), as_stream(s)));
}

void Nccl::reduce_scatter(const void* in, void* out, size_t count, DataType dt, ReduceOp op,
                          Stream s) {
  settle("ncclReduceScatter",
         nccl_api(where_).reduce_scatter(in, out, count, *nccl_dtype(dt), *nccl_op(op),
                                         as_comm(comm_), as_stream(s)));
}

void Nccl::all_gather(const void* in, void* out, size_t count, DataType dt, Stream s) {
  settle("ncclAllGather", nccl_api(where_).all_gather(in, out, count, *nccl_dtype(dt),
                                                      as_comm(comm_), as_stream(s)));
}

void Nccl::group_start() { settle("ncclGroupStart", nccl_api(where_).group_start()); }
void Nccl::group_end() { settle("ncclGroupEnd", nccl_api(where_).group_end()); }

void Nccl::send(const void* in, size_t count, DataType dt, int peer, Stream s) {
  settle("ncclSend",
         nccl_api(where_).send(in, count, *nccl_dtype(dt), peer, as_comm(comm_), as_stream(s)));
}

void Nccl::recv(void* out, size_t count, DataType dt, int peer, Stream s) {
  settle("ncclRecv",
         nccl_api(where_).recv(out, count, *nccl_dtype(dt), peer, as_comm(comm_), as_stream(s)));
}

std::string Nccl::async_error() {
  if (aborted_) return "the NCCL communicator was aborted";
  const NcclApi& api = nccl_api(where_);
  ncclResult_t r = ncclSuccess;
  if (api.comm_get_async_error(as_comm(comm_), &r) != ncclSuccess) r = ncclSystemError;
  if (r == ncclSuccess || r == ncclInProgress) return {};
  return nccl_failure("NCCL", api.get_error_string(r), api.get_last_error(as_comm(comm_)));
}

void Nccl::abort() {
  if (!comm_ || aborted_) return;
  aborted_ = true;
  nccl_api(where_).comm_abort(as_comm(comm_));
}

}  // namespace strata::device
