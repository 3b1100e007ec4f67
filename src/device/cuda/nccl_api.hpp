// NCCL's functions, loaded from libnccl.so.2 at the first device call rather than linked: a
// process that loads Strata beside another user of NCCL (torch's own copy, newer or older) then
// holds one NCCL, whichever was loaded first, instead of two with one name (torch imported after
// a linked Strata failed with "undefined symbol: ncclCommResume").
#pragma once

#include <nccl.h>

#include "strata/error.hpp"

namespace strata::device {

struct NcclApi {
  decltype(&ncclGetUniqueId) get_unique_id;
  decltype(&ncclCommInitRank) comm_init_rank;
  decltype(&ncclCommSplit) comm_split;
  decltype(&ncclCommDestroy) comm_destroy;
  decltype(&ncclCommAbort) comm_abort;
  decltype(&ncclCommGetAsyncError) comm_get_async_error;
  decltype(&ncclGetErrorString) get_error_string;
  decltype(&ncclGetLastError) get_last_error;
  decltype(&ncclAllReduce) all_reduce;
  decltype(&ncclReduce) reduce;
  decltype(&ncclBroadcast) broadcast;
  decltype(&ncclReduceScatter) reduce_scatter;
  decltype(&ncclAllGather) all_gather;
  decltype(&ncclGroupStart) group_start;
  decltype(&ncclGroupEnd) group_end;
  decltype(&ncclSend) send;
  decltype(&ncclRecv) recv;
};

/// NCCL, loaded once (the copy already in the process, if any); throws Error(transport, where)
/// naming the library and the loader's reason when it cannot be.
const NcclApi& nccl_api(const ErrorContext& where);

}  // namespace strata::device
