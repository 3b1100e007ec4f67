// The C ABI (strata.h) over the C++ Communicator: errors, communicators, unique ids, work
// handles and groups; the collectives are in strata_c_collectives.cpp, the call machinery in
// c_call.hpp. No exception leaves this file.
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>

#include "base/config.hpp"
#include "bootstrap/job_store.hpp"
#include "c_call.hpp"

namespace strata_c {
thread_local std::string last_error;
thread_local int group_depth = 0;
thread_local std::vector<Pending> group_calls;
}  // namespace strata_c

using namespace strata_c;

namespace {

// Unique ids: the process that made one serves its store until the communicator it joins with
// it goes away (make_job_store keeps the server); keyed by the id's token.
std::mutex served_mutex;
std::map<std::string, std::unique_ptr<strata::TcpStoreServer>> served;

constexpr const char* kIdMagic = "strata-uid";

// strataMemAllocSymmetric's buffers by address, until strataMemFreeSymmetric.
std::mutex symmetric_mutex;
std::map<void*, strata::SymmetricBuffer> symmetric;

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
    // A device handle's child is one too, on the same stream (Communicator::split keeps it).
    if (c) *newcomm = new strataComm{std::move(c), comm->device};
  });
}

strataResult_t strataCommOnStream(strataComm_t comm, strataStream_t stream,
                                  strataComm_t* device_comm) {
  return guarded("strataCommOnStream", [&] {
    require(device_comm != nullptr, strataInvalidArgument, "device_comm is NULL");
    *device_comm = nullptr;
    *device_comm = new strataComm{comm_of(comm).on_stream(stream), true};
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

strataResult_t strataCommCheckHealth(strataComm_t comm) {
  return guarded("strataCommCheckHealth", [&] { comm_of(comm).check_health(); });
}

strataResult_t strataCommIssueFromThisThread(strataComm_t comm) {
  return guarded("strataCommIssueFromThisThread", [&] { comm_of(comm).issue_from_this_thread(); });
}

strataResult_t strataMemAllocSymmetric(strataComm_t comm, size_t bytes, void** ptr) {
  return guarded("strataMemAllocSymmetric", [&] {
    require(ptr != nullptr, strataInvalidArgument, "ptr is NULL");
    strata::SymmetricBuffer b = comm_of(comm).alloc_symmetric(bytes);
    *ptr = b.data();
    std::lock_guard<std::mutex> l(symmetric_mutex);
    symmetric.emplace(b.data(), std::move(b));
  });
}

strataResult_t strataMemFreeSymmetric(void* ptr) {
  return guarded("strataMemFreeSymmetric", [&] {
    if (ptr == nullptr) return;
    std::lock_guard<std::mutex> l(symmetric_mutex);
    require(symmetric.erase(ptr) == 1, strataInvalidArgument,
            "ptr was not returned by strataMemAllocSymmetric, or was freed already");
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
  auto issued = [&](Pending& p, strataResult_t r, const strata::Work& w) {
    if (p.handle) {
      p.handle->work = w;
      p.handle->issued = true;
      if (r != strataSuccess) p.handle->failed = r, p.handle->error = last_error;
    } else if (p.blocks && r == strataSuccess) {
      blocking.push_back(w);
    }
    if (r != strataSuccess && first == strataSuccess) first = r, first_error = last_error;
  };
  std::vector<bool> batched(calls.size(), false);  // issued with an earlier call's batch
  for (size_t i = 0; i < calls.size(); ++i) {
    if (batched[i]) continue;
    Pending& p = calls[i];
    if (p.batch) {
      // The device sends and receives of this communicator, issued together where its first
      // one stood.
      std::vector<size_t> members;
      std::vector<strata::PeerOp> ops;
      for (size_t j = i; j < calls.size(); ++j) {
        if (calls[j].batch != p.batch) continue;
        members.push_back(j);
        ops.push_back(calls[j].op);
        batched[j] = true;
      }
      std::vector<strata::Work> works;
      const strataResult_t r = guarded("strataGroupEnd", [&] { works = p.batch->send_recv(ops); });
      for (size_t k = 0; k < members.size(); ++k) {
        issued(calls[members[k]], r, r == strataSuccess ? works[k] : strata::Work());
      }
      continue;
    }
    strata::Work w;
    const strataResult_t r = guarded("strataGroupEnd", [&] { w = p.issue(); });
    issued(p, r, w);
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
