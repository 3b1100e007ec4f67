// The C ABI's call machinery (strata_c.cpp, strata_c_collectives.cpp): the handles, enum
// conversion, error capture (no exception leaves a strata* function) and NCCL-style groups.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "strata.h"
#include "strata/communicator.hpp"
#include "strata/error.hpp"

struct strataComm {
  strata::Communicator comm;
  bool device = false;  // strataCommOnStream's: CUDA buffers, and a NULL work only enqueues
};

struct strataWork {
  strata::Work work;
  bool issued = true;                     // false while its group is open
  strataResult_t failed = strataSuccess;  // set when strataGroupEnd could not issue it
  std::string error;
};

namespace strata_c {

using strata::Buffer;
using strata::DataType;
using strata::ErrorCode;
using strata::ReduceOp;

/// This thread's last error message (strataGetLastError).
extern thread_local std::string last_error;

// A failure before the C++ layer is reached: bad handle, enum or usage.
struct CallError {
  strataResult_t code;
  std::string what;
};

inline strataResult_t fail(strataResult_t code, std::string what) {
  last_error = std::move(what);
  return code;
}

inline strataResult_t result_of(ErrorCode c) {
  switch (c) {
    case ErrorCode::invalid_argument:
      return strataInvalidArgument;
    case ErrorCode::timeout:
      return strataTimeout;
    case ErrorCode::peer_failure:
      return strataRemoteError;
    case ErrorCode::transport:
      return strataSystemError;
    case ErrorCode::aborted:
      return strataAborted;
    case ErrorCode::internal:
      return strataInternalError;
  }
  return strataInternalError;
}

// Runs `f`, turning every exception into a result code and this thread's last error.
template <typename F>
strataResult_t guarded(const char* fn, F&& f) {
  try {
    f();
    return strataSuccess;
  } catch (const CallError& e) {
    return fail(e.code, std::string("strata: ") + fn + ": " + e.what);
  } catch (const strata::Error& e) {
    return fail(result_of(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    return fail(strataSystemError, std::string("strata: ") + fn + ": out of memory");
  } catch (const std::exception& e) {
    return fail(strataInternalError, std::string("strata: ") + fn + ": " + e.what());
  } catch (...) {
    return fail(strataInternalError, std::string("strata: ") + fn + ": unknown exception");
  }
}

inline void require(bool ok, strataResult_t code, const std::string& what) {
  if (!ok) throw CallError{code, what};
}

inline strata::Communicator& comm_of(strataComm_t c) {
  require(c != nullptr, strataInvalidUsage, "comm is NULL");
  return c->comm;
}

inline DataType dtype_of(strataDataType_t t) {
  switch (t) {
    case strataInt8:
      return DataType::i8;
    case strataUint8:
      return DataType::u8;
    case strataInt32:
      return DataType::i32;
    case strataUint32:
      return DataType::u32;
    case strataInt64:
      return DataType::i64;
    case strataUint64:
      return DataType::u64;
    case strataFloat16:
      return DataType::f16;
    case strataFloat32:
      return DataType::f32;
    case strataFloat64:
      return DataType::f64;
    case strataBfloat16:
      return DataType::bf16;
    case strataInt16:
      return DataType::i16;
    case strataBool:
      return DataType::boolean;
    case strataComplex64:
      return DataType::c64;
    case strataComplex128:
      return DataType::c128;
  }
  throw CallError{strataInvalidArgument, "unknown datatype " + std::to_string(int(t))};
}

inline ReduceOp op_of(strataRedOp_t op) {
  switch (op) {
    case strataSum:
      return ReduceOp::sum;
    case strataProd:
      return ReduceOp::prod;
    case strataMax:
      return ReduceOp::max;
    case strataMin:
      return ReduceOp::min;
    case strataAvg:
      return ReduceOp::avg;
    case strataBand:
      return ReduceOp::band;
    case strataBor:
      return ReduceOp::bor;
    case strataBxor:
      return ReduceOp::bxor;
  }
  throw CallError{strataInvalidArgument, "unknown reduction op " + std::to_string(int(op))};
}

// `count` elements for each of the group's ranks, refused where that overflows size_t.
inline size_t times_ranks(size_t count, const strata::Communicator& c) {
  const size_t n = size_t(c.size());
  require(count <= SIZE_MAX / n, strataInvalidArgument,
          "count " + std::to_string(count) + " for each of " + std::to_string(n) +
              " ranks overflows size_t");
  return count * n;
}

inline Buffer buf(strataComm_t c, const void* p, size_t count, strataDataType_t t) {
  return Buffer{const_cast<void*>(p), count, dtype_of(t),
                c && c->device ? strata::MemoryKind::cuda : strata::MemoryKind::host};
}

// ---- groups: calls recorded per thread, issued in order by the outermost strataGroupEnd ----

struct Pending {
  std::function<strata::Work()> issue;
  strataWork* handle;  // null: no handle asked for
  bool blocks;         // no handle, on a host communicator: GroupEnd waits for it
  // A send or receive on a device handle: GroupEnd issues those of one communicator together
  // (Communicator::send_recv: one ncclGroupStart/End on NCCL), as NCCL's group does.
  strata::Communicator* batch = nullptr;
  strata::PeerOp op{};
};
extern thread_local int group_depth;
extern thread_local std::vector<Pending> group_calls;

// `make` converts and checks the arguments (so a bad enum or handle fails at the call, even
// inside a group) and returns the C++ call to make. submit issues it, or inside a group records
// it. When `work` is NULL it blocks on a host communicator; on a device one
// (strataCommOnStream) the call is on its stream once enqueued, as NCCL's are.
template <typename Make>
strataResult_t submit(const char* fn, strataComm_t comm, strataWork_t* work, Make make) {
  return guarded(fn, [&] {
    std::function<strata::Work()> issue = make();
    const bool blocks = !work && !(comm && comm->device);
    if (group_depth > 0) {
      strataWork* h = work ? new strataWork{strata::Work(), false, strataSuccess, {}} : nullptr;
      group_calls.push_back({std::move(issue), h, blocks});
      if (work) *work = h;
      return;
    }
    strata::Work w = issue();
    if (work) {
      *work = new strataWork{w, true, strataSuccess, {}};
    } else if (blocks) {
      w.wait();
    }
  });
}

// After a send or receive was submitted: inside a group, on a device handle, it joins its
// communicator's batch (Pending::batch).
inline void join_batch(strataResult_t submitted, strataComm_t comm, const strata::PeerOp& op) {
  if (submitted != strataSuccess || group_depth == 0 || !comm->device) return;
  group_calls.back().batch = &comm->comm;
  group_calls.back().op = op;
}

}  // namespace strata_c
