// device::Nccl: one blocking NCCL communicator, created against the deadline.
#include "device/nccl.hpp"

#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "device/cuda/nccl_api.hpp"
#include "device/cuda/nccl_types.hpp"

namespace strata::device {
namespace {

ncclComm_t as_comm(void* c) { return static_cast<ncclComm_t>(c); }
cudaStream_t as_stream(Stream s) { return static_cast<cudaStream_t>(s); }

// A blocking communicator, made by `make` (ncclCommInitRank, ncclCommSplit) on a helper thread
// that this one waits for until the deadline: a rank that never joins fails the others instead
// of hanging them. (A non-blocking communicator would bound the wait too, but NCCL launches each
// of its calls from a thread it creates for the call, group.cc: ~5 us a call, measured on an
// H200.)
ncclComm_t bounded(const char* call, Clock::time_point deadline, const ErrorContext& where,
                   std::function<ncclResult_t(const NcclApi&, ncclComm_t*)> make) {
  const NcclApi& api = nccl_api(where);
  struct Made {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    ncclResult_t result = ncclInternalError;
    ncclComm_t comm = nullptr;
  };
  auto made = std::make_shared<Made>();
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) cudaGetLastError();
  std::thread([made, device, &api, make = std::move(make)] {
    cudaSetDevice(device);
    ncclComm_t comm = nullptr;
    const ncclResult_t r = make(api, &comm);
    std::lock_guard<std::mutex> l(made->mu);
    made->result = r;
    made->comm = comm;
    made->done = true;
    made->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> l(made->mu);
  if (!made->cv.wait_until(l, deadline, [&] { return made->done; })) {
    // The helper stays blocked in NCCL; it ends with the process.
    throw Error(ErrorCode::timeout, where,
                std::string(call) +
                    " still in progress at the deadline (a rank that never joined the NCCL "
                    "communicator)");
  }
  if (made->result != ncclSuccess) {
    throw Error(
        ErrorCode::transport, where,
        nccl_failure(call, api.get_error_string(made->result), api.get_last_error(nullptr)));
  }
  return made->comm;
}

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
  ncclUniqueId uid;
  std::memcpy(&uid, id.data(), sizeof uid);
  comm_ = bounded("ncclCommInitRank", deadline, where,
                  [uid, rank, size](const NcclApi& api, ncclComm_t* comm) {
                    return api.comm_init_rank(comm, size, uid, rank);
                  });
}

std::unique_ptr<Nccl> Nccl::split(int color, int key, Clock::time_point deadline,
                                  const ErrorContext& where) {
  void* parent = live();
  void* child = bounded(
      "ncclCommSplit", deadline, where, [parent, color, key](const NcclApi& api, ncclComm_t* comm) {
        return api.comm_split(as_comm(parent), color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, comm,
                              nullptr);
      });
  if (!child) return nullptr;
  return std::unique_ptr<Nccl>(new Nccl(child, where));
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
                                                      as_comm(live()), as_stream(s)));
}

void Nccl::reduce(const void* in, void* out, size_t count, DataType dt, ReduceOp op, int root,
                  Stream s) {
  settle("ncclReduce", nccl_api(where_).reduce(in, out, count, *nccl_dtype(dt), *nccl_op(op), root,
                                               as_comm(live()), as_stream(s)));
}

void Nccl::broadcast(const void* in, void* out, size_t count, DataType dt, int root, Stream s) {
  settle("ncclBroadcast", nccl_api(where_).broadcast(in, out, count, *nccl_dtype(dt), root,
                                                     as_comm(live()), as_stream(s)));
}

void Nccl::reduce_scatter(const void* in, void* out, size_t count, DataType dt, ReduceOp op,
                          Stream s) {
  settle("ncclReduceScatter",
         nccl_api(where_).reduce_scatter(in, out, count, *nccl_dtype(dt), *nccl_op(op),
                                         as_comm(live()), as_stream(s)));
}

void Nccl::all_gather(const void* in, void* out, size_t count, DataType dt, Stream s) {
  settle("ncclAllGather", nccl_api(where_).all_gather(in, out, count, *nccl_dtype(dt),
                                                      as_comm(live()), as_stream(s)));
}

void* Nccl::live() const {
  if (aborted_.load()) {
    throw Error(ErrorCode::aborted, where_,
                "the group's NCCL communicator was aborted after an earlier failure of a device "
                "call; make a new communicator");
  }
  return comm_;
}

void Nccl::group_start() {
  live();  // before the group opens: a send that throws inside it would leave it open
  settle("ncclGroupStart", nccl_api(where_).group_start());
}
void Nccl::group_end() { settle("ncclGroupEnd", nccl_api(where_).group_end()); }

void Nccl::send(const void* in, size_t count, DataType dt, int peer, Stream s) {
  settle("ncclSend",
         nccl_api(where_).send(in, count, *nccl_dtype(dt), peer, as_comm(live()), as_stream(s)));
}

void Nccl::recv(void* out, size_t count, DataType dt, int peer, Stream s) {
  settle("ncclRecv",
         nccl_api(where_).recv(out, count, *nccl_dtype(dt), peer, as_comm(live()), as_stream(s)));
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
  if (!comm_ || aborted_.exchange(true)) return;
  nccl_api(where_).comm_abort(as_comm(comm_));
}

}  // namespace strata::device
