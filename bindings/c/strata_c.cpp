// The C ABI (strata.h) over the C++ Communicator: enum conversion, error capture, work handles
// and NCCL-style groups. No exception leaves this file.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "base/config.hpp"
#include "bootstrap/job_store.hpp"
#include "strata.h"
#include "strata/communicator.hpp"
#include "strata/error.hpp"

struct strataComm {
  strata::Communicator comm;
};

struct strataWork {
  strata::Work work;
  bool issued = true;                     // false while its group is open
  strataResult_t failed = strataSuccess;  // set when strataGroupEnd could not issue it
  std::string error;
};

namespace {

using strata::Buffer;
using strata::DataType;
using strata::ErrorCode;
using strata::ReduceOp;

thread_local std::string last_error;

// A failure before the C++ layer is reached: bad handle, enum or usage.
struct CallError {
  strataResult_t code;
  std::string what;
};

strataResult_t fail(strataResult_t code, std::string what) {
  last_error = std::move(what);
  return code;
}

strataResult_t result_of(ErrorCode c) {
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

void require(bool ok, strataResult_t code, const std::string& what) {
  if (!ok) throw CallError{code, what};
}

strata::Communicator& comm_of(strataComm_t c) {
  require(c != nullptr, strataInvalidUsage, "comm is NULL");
  return c->comm;
}

DataType dtype_of(strataDataType_t t) {
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

ReduceOp op_of(strataRedOp_t op) {
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

Buffer buf(const void* p, size_t count, strataDataType_t t) {
  return Buffer{const_cast<void*>(p), count, dtype_of(t)};
}

// ---- groups: calls recorded per thread, issued in order by the outermost strataGroupEnd ----

struct Pending {
  std::function<strata::Work()> issue;
  strataWork* handle;  // null: the caller asked to block, so GroupEnd waits for it
};
thread_local int group_depth = 0;
thread_local std::vector<Pending> group_calls;

// `make` converts and checks the arguments (so a bad enum or handle fails at the call, even
// inside a group) and returns the C++ call to make. submit issues it, or inside a group records
// it; it blocks when `work` is NULL.
template <typename Make>
strataResult_t submit(const char* fn, strataWork_t* work, Make make) {
  return guarded(fn, [&] {
    std::function<strata::Work()> issue = make();
    if (group_depth > 0) {
      strataWork* h = work ? new strataWork{strata::Work(), false, strataSuccess, {}} : nullptr;
      group_calls.push_back({std::move(issue), h});
      if (work) *work = h;
      return;
    }
    strata::Work w = issue();
    if (work) {
      *work = new strataWork{w, true, strataSuccess, {}};
    } else {
      w.wait();
    }
  });
}

// Unique ids: the process that made one serves its store until the communicator it joins with
// it goes away (make_job_store keeps the server); keyed by the id's token.
std::mutex served_mutex;
std::map<std::string, std::unique_ptr<strata::TcpStoreServer>> served;

constexpr const char* kIdMagic = "strata-uid";

}  // namespace

extern "C" {

const char* strataGetErrorString(strataResult_t r) {
  switch (r) {
    case strataSuccess:
      return "no error";
    case strataSystemError:
      return "system error (transport, sockets or shared memory)";
    case strataInternalError:
      return "internal error (a bug in Strata)";
    case strataInvalidArgument:
      return "invalid argument";
    case strataInvalidUsage:
      return "invalid usage";
    case strataRemoteError:
      return "remote process exited or there was a network error";
    case strataInProgress:
      return "operation in progress";
    case strataTimeout:
      return "timed out";
    case strataAborted:
      return "aborted";
    case strataNumResults:
      break;
  }
  return "unknown result code";
}

const char* strataGetLastError(void) { return last_error.c_str(); }

strataResult_t strataGetVersion(int* version) {
  return guarded("strataGetVersion", [&] {
    require(version != nullptr, strataInvalidArgument, "version is NULL");
    *version = STRATA_VERSION_CODE;
  });
}

strataResult_t strataCommInitFromEnv(strataComm_t* comm) {
  return guarded("strataCommInitFromEnv", [&] {
    require(comm != nullptr, strataInvalidArgument, "comm is NULL");
    *comm = nullptr;
    *comm = new strataComm{strata::Communicator::from_env()};
  });
}

strataResult_t strataGetUniqueId(strataUniqueId* id) {
  return guarded("strataGetUniqueId", [&] {
    require(id != nullptr, strataInvalidArgument, "uniqueId is NULL");
    strata::TcpStoreOptions o;
    o.host = strata::config().store_addr.empty() ? strata::bootstrap::first_external_ipv4()
                                                 : strata::config().store_addr;
    o.token = strata::bootstrap::random_token();
    auto server = std::make_unique<strata::TcpStoreServer>(o);
    *id = strataUniqueId{};
    std::snprintf(id->internal, sizeof id->internal, "%s %s %u %s", kIdMagic, o.host.c_str(),
                  unsigned(server->port()), o.token.c_str());
    std::lock_guard lock(served_mutex);
    served[o.token] = std::move(server);
  });
}

strataResult_t strataCommInitRank(strataComm_t* comm, int nranks, strataUniqueId id, int rank) {
  return guarded("strataCommInitRank", [&] {
    require(comm != nullptr, strataInvalidArgument, "comm is NULL");
    *comm = nullptr;
    id.internal[STRATA_UNIQUE_ID_BYTES - 1] = '\0';
    std::istringstream in(id.internal);
    std::string magic;
    unsigned port = 0;
    strata::TcpStoreOptions o;
    in >> magic >> o.host >> port >> o.token;
    require(magic == kIdMagic && port > 0 && port < 65536 && !o.token.empty(),
            strataInvalidArgument, "the unique id was not made by strataGetUniqueId");
    o.port = uint16_t(port);
    o.connect_timeout = strata::config().timeout;
    std::unique_ptr<strata::TcpStoreServer> server;
    {
      std::lock_guard lock(served_mutex);
      if (auto it = served.find(o.token); it != served.end()) {
        server = std::move(it->second);
        served.erase(it);
      }
    }
    auto store = strata::bootstrap::make_job_store(std::move(server), o);
    // Named after the id, so that logs and errors tell communicators from different ids apart.
    strata::CommOptions options;
    options.name = "uid-" + o.token.substr(0, 8);
    *comm = new strataComm{strata::Communicator::create(store, rank, nranks, options)};
  });
}

strataResult_t strataCommSplit(strataComm_t comm, int color, int key, strataComm_t* newcomm) {
  return guarded("strataCommSplit", [&] {
    require(newcomm != nullptr, strataInvalidArgument, "newcomm is NULL");
    *newcomm = nullptr;
    strata::Communicator c = comm_of(comm).split(color < 0 ? -1 : color, key);
    if (c) *newcomm = new strataComm{std::move(c)};
  });
}

strataResult_t strataCommDestroy(strataComm_t comm) {
  return guarded("strataCommDestroy", [&] {
    comm_of(comm);
    delete comm;
  });
}

strataResult_t strataCommAbort(strataComm_t comm) {
  return guarded("strataCommAbort", [&] {
    comm_of(comm).abort();
    delete comm;
  });
}

strataResult_t strataCommCount(const strataComm_t comm, int* count) {
  return guarded("strataCommCount", [&] {
    require(count != nullptr, strataInvalidArgument, "count is NULL");
    *count = comm_of(comm).size();
  });
}

strataResult_t strataCommUserRank(const strataComm_t comm, int* rank) {
  return guarded("strataCommUserRank", [&] {
    require(rank != nullptr, strataInvalidArgument, "rank is NULL");
    *rank = comm_of(comm).rank();
  });
}

strataResult_t strataAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                               strataDataType_t datatype, strataRedOp_t op, strataComm_t comm,
                               strataWork_t* work) {
  return submit("strataAllReduce", work, [&] {
    auto& c = comm_of(comm);
    return [&c, in = buf(sendbuff, count, datatype), out = buf(recvbuff, count, datatype),
            o = op_of(op)] { return c.all_reduce(in, out, o); };
  });
}

strataResult_t strataBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                               strataDataType_t datatype, int root, strataComm_t comm,
                               strataWork_t* work) {
  return submit("strataBroadcast", work, [&] {
    auto& c = comm_of(comm);
    const Buffer out = buf(recvbuff, count, datatype);
    // sendbuff matters on root only (it may be NULL elsewhere).
    const Buffer in = c.rank() == root ? buf(sendbuff, count, datatype) : out;
    return [&c, in, out, root] { return c.broadcast(in, out, root); };
  });
}

strataResult_t strataReduce(const void* sendbuff, void* recvbuff, size_t count,
                            strataDataType_t datatype, strataRedOp_t op, int root,
                            strataComm_t comm, strataWork_t* work) {
  return submit("strataReduce", work, [&] {
    auto& c = comm_of(comm);
    return [&c, in = buf(sendbuff, count, datatype), out = buf(recvbuff, count, datatype),
            o = op_of(op), root] { return c.reduce(in, out, o, root); };
  });
}

strataResult_t strataAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                               strataDataType_t datatype, strataComm_t comm, strataWork_t* work) {
  return submit("strataAllGather", work, [&] {
    auto& c = comm_of(comm);
    return [&c, in = buf(sendbuff, sendcount, datatype),
            out = buf(recvbuff, sendcount * size_t(c.size()), datatype)] {
      return c.all_gather(in, out);
    };
  });
}

strataResult_t strataReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                   strataDataType_t datatype, strataRedOp_t op, strataComm_t comm,
                                   strataWork_t* work) {
  return submit("strataReduceScatter", work, [&] {
    auto& c = comm_of(comm);
    return [&c, in = buf(sendbuff, recvcount * size_t(c.size()), datatype),
            out = buf(recvbuff, recvcount, datatype),
            o = op_of(op)] { return c.reduce_scatter(in, out, o); };
  });
}

strataResult_t strataAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                              strataDataType_t datatype, strataComm_t comm, strataWork_t* work) {
  return submit("strataAlltoAll", work, [&] {
    auto& c = comm_of(comm);
    const size_t total = count * size_t(c.size());
    return [&c, in = buf(sendbuff, total, datatype), out = buf(recvbuff, total, datatype)] {
      return c.all_to_all(in, out);
    };
  });
}

strataResult_t strataAlltoAllv(const void* sendbuff, const size_t* sendcounts,
                               const size_t* sdispls, void* recvbuff, const size_t* recvcounts,
                               const size_t* rdispls, strataDataType_t datatype, strataComm_t comm,
                               strataWork_t* work) {
  return submit("strataAlltoAllv", work, [&] {
    auto& c = comm_of(comm);
    require(sendcounts && sdispls && recvcounts && rdispls, strataInvalidArgument,
            "a count or displacement array is NULL");
    const size_t n = size_t(c.size());
    std::vector<size_t> sc(sendcounts, sendcounts + n), sd(sdispls, sdispls + n),
        rc(recvcounts, recvcounts + n), rd(rdispls, rdispls + n);
    size_t in_count = 0, out_count = 0;  // the extent each buffer must have
    for (size_t i = 0; i < n; ++i) {
      in_count = std::max(in_count, sd[i] + sc[i]);
      out_count = std::max(out_count, rd[i] + rc[i]);
    }
    return [&c, in = buf(sendbuff, in_count, datatype), out = buf(recvbuff, out_count, datatype),
            sc, sd, rc, rd] { return c.all_to_allv(in, sc, sd, out, rc, rd); };
  });
}

strataResult_t strataGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                            strataDataType_t datatype, int root, strataComm_t comm,
                            strataWork_t* work) {
  return submit("strataGather", work, [&] {
    auto& c = comm_of(comm);
    return [&c, in = buf(sendbuff, sendcount, datatype),
            out = buf(recvbuff, c.rank() == root ? sendcount * size_t(c.size()) : 0, datatype),
            root] { return c.gather(in, out, root); };
  });
}

strataResult_t strataScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                             strataDataType_t datatype, int root, strataComm_t comm,
                             strataWork_t* work) {
  return submit("strataScatter", work, [&] {
    auto& c = comm_of(comm);
    return [&c, in = buf(sendbuff, c.rank() == root ? recvcount * size_t(c.size()) : 0, datatype),
            out = buf(recvbuff, recvcount, datatype), root] { return c.scatter(in, out, root); };
  });
}

strataResult_t strataBarrier(strataComm_t comm, strataWork_t* work) {
  return submit("strataBarrier", work, [&] {
    auto& c = comm_of(comm);
    return [&c] { return c.barrier(); };
  });
}

strataResult_t strataSend(const void* sendbuff, size_t count, strataDataType_t datatype, int peer,
                          strataComm_t comm, strataWork_t* work) {
  return submit("strataSend", work, [&] {
    auto& c = comm_of(comm);
    return [&c, in = buf(sendbuff, count, datatype), peer] { return c.send(in, peer); };
  });
}

strataResult_t strataRecv(void* recvbuff, size_t count, strataDataType_t datatype, int peer,
                          strataComm_t comm, strataWork_t* work) {
  return submit("strataRecv", work, [&] {
    auto& c = comm_of(comm);
    return [&c, out = buf(recvbuff, count, datatype), peer] { return c.recv(out, peer); };
  });
}

strataResult_t strataGroupStart(void) {
  ++group_depth;
  return strataSuccess;
}

strataResult_t strataGroupEnd(void) {
  if (group_depth == 0)
    return fail(strataInvalidUsage, "strata: strataGroupEnd without strataGroupStart");
  if (--group_depth > 0) return strataSuccess;
  std::vector<Pending> calls = std::move(group_calls);
  group_calls.clear();
  // Issue every call, even after one fails, so that the peers' matching calls are not left
  // waiting for this rank; report the first failure.
  strataResult_t first = strataSuccess;
  std::string first_error;
  std::vector<strata::Work> blocking;
  for (Pending& p : calls) {
    strataResult_t r = guarded("strataGroupEnd", [&] {
      strata::Work w = p.issue();
      if (p.handle) {
        p.handle->work = w;
      } else {
        blocking.push_back(w);
      }
    });
    if (p.handle) {
      p.handle->issued = true;
      if (r != strataSuccess) p.handle->failed = r, p.handle->error = last_error;
    }
    if (r != strataSuccess && first == strataSuccess) first = r, first_error = last_error;
  }
  for (strata::Work& w : blocking) {
    strataResult_t r = guarded("strataGroupEnd", [&] { w.wait(); });
    if (r != strataSuccess && first == strataSuccess) first = r, first_error = last_error;
  }
  if (first != strataSuccess) last_error = first_error;
  return first;
}

strataResult_t strataWorkWait(strataWork_t work) {
  return guarded("strataWorkWait", [&] {
    require(work != nullptr, strataInvalidUsage, "work is NULL");
    require(work->issued, strataInvalidUsage,
            "the operation's group is still open (call strataGroupEnd first)");
    if (work->failed != strataSuccess) throw CallError{work->failed, work->error};
    work->work.wait();
  });
}

strataResult_t strataWorkTest(strataWork_t work, int* done) {
  return guarded("strataWorkTest", [&] {
    require(work != nullptr && done != nullptr, strataInvalidUsage, "work or done is NULL");
    if (work->failed != strataSuccess) throw CallError{work->failed, work->error};
    *done = work->issued && work->work.test() ? 1 : 0;
  });
}

strataResult_t strataWorkFree(strataWork_t work) {
  delete work;
  return strataSuccess;
}

}  // extern "C"
