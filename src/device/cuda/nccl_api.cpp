#include "device/cuda/nccl_api.hpp"

#include <dlfcn.h>

#include <mutex>
#include <string>
#include <type_traits>

namespace strata::device {
namespace {

// NCCL's library by its soname: dlopen returns the copy already loaded under that name.
constexpr const char* kLibrary = "libnccl.so.2";

struct Loaded {
  NcclApi api{};
  std::string error;  // why it could not be loaded; empty when it was
};

Loaded load() {
  Loaded l;
  void* lib = dlopen(kLibrary, RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    l.error = dlerror();
    return l;
  }
  auto get = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (!fn && l.error.empty()) l.error = std::string(kLibrary) + " has no " + name;
  };
  NcclApi& a = l.api;
  get(a.get_unique_id, "ncclGetUniqueId");
  get(a.comm_init_rank, "ncclCommInitRank");
  get(a.comm_split, "ncclCommSplit");
  get(a.comm_destroy, "ncclCommDestroy");
  get(a.comm_abort, "ncclCommAbort");
  get(a.comm_get_async_error, "ncclCommGetAsyncError");
  get(a.get_error_string, "ncclGetErrorString");
  get(a.get_last_error, "ncclGetLastError");
  get(a.all_reduce, "ncclAllReduce");
  get(a.reduce, "ncclReduce");
  get(a.broadcast, "ncclBroadcast");
  get(a.reduce_scatter, "ncclReduceScatter");
  get(a.all_gather, "ncclAllGather");
  get(a.group_start, "ncclGroupStart");
  get(a.group_end, "ncclGroupEnd");
  get(a.send, "ncclSend");
  get(a.recv, "ncclRecv");
  return l;
}

}  // namespace

const NcclApi& nccl_api(const ErrorContext& where) {
  static const Loaded loaded = load();
  if (!loaded.error.empty()) {
    throw Error(ErrorCode::transport, where, "cannot load NCCL: " + loaded.error);
  }
  return loaded.api;
}

}  // namespace strata::device
