// The C ABI's collectives and point-to-point calls: each converts and checks its arguments at
// the call (inside a group too) and submits the C++ call (c_call.hpp).
#include "c_call.hpp"

using namespace strata_c;

extern "C" {

strataResult_t strataAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                               strataDataType_t datatype, strataRedOp_t op, strataComm_t comm,
                               strataWork_t* work) {
  return submit("strataAllReduce", comm, work, [&] {
    auto& c = comm_of(comm);
    return
        [&c, in = buf(comm, sendbuff, count, datatype), out = buf(comm, recvbuff, count, datatype),
         o = op_of(op)] { return c.all_reduce(in, out, o); };
  });
}

strataResult_t strataBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                               strataDataType_t datatype, int root, strataComm_t comm,
                               strataWork_t* work) {
  return submit("strataBroadcast", comm, work, [&] {
    auto& c = comm_of(comm);
    const Buffer out = buf(comm, recvbuff, count, datatype);
    // sendbuff matters on root only (it may be NULL elsewhere).
    const Buffer in = c.rank() == root ? buf(comm, sendbuff, count, datatype) : out;
    return [&c, in, out, root] { return c.broadcast(in, out, root); };
  });
}

strataResult_t strataReduce(const void* sendbuff, void* recvbuff, size_t count,
                            strataDataType_t datatype, strataRedOp_t op, int root,
                            strataComm_t comm, strataWork_t* work) {
  return submit("strataReduce", comm, work, [&] {
    auto& c = comm_of(comm);
    return
        [&c, in = buf(comm, sendbuff, count, datatype), out = buf(comm, recvbuff, count, datatype),
         o = op_of(op), root] { return c.reduce(in, out, o, root); };
  });
}

strataResult_t strataAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                               strataDataType_t datatype, strataComm_t comm, strataWork_t* work) {
  return submit("strataAllGather", comm, work, [&] {
    auto& c = comm_of(comm);
    return [&c, in = buf(comm, sendbuff, sendcount, datatype),
            out = buf(comm, recvbuff, times_ranks(sendcount, c), datatype)] {
      return c.all_gather(in, out);
    };
  });
}

strataResult_t strataReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                   strataDataType_t datatype, strataRedOp_t op, strataComm_t comm,
                                   strataWork_t* work) {
  return submit("strataReduceScatter", comm, work, [&] {
    auto& c = comm_of(comm);
    return [&c, in = buf(comm, sendbuff, times_ranks(recvcount, c), datatype),
            out = buf(comm, recvbuff, recvcount, datatype),
            o = op_of(op)] { return c.reduce_scatter(in, out, o); };
  });
}

strataResult_t strataAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                              strataDataType_t datatype, strataComm_t comm, strataWork_t* work) {
  return submit("strataAlltoAll", comm, work, [&] {
    auto& c = comm_of(comm);
    const size_t total = times_ranks(count, c);
    return [&c, in = buf(comm, sendbuff, total, datatype),
            out = buf(comm, recvbuff, total, datatype)] { return c.all_to_all(in, out); };
  });
}

strataResult_t strataAlltoAllv(const void* sendbuff, const size_t* sendcounts,
                               const size_t* sdispls, void* recvbuff, const size_t* recvcounts,
                               const size_t* rdispls, strataDataType_t datatype, strataComm_t comm,
                               strataWork_t* work) {
  return submit("strataAlltoAllv", comm, work, [&] {
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
    return [&c, in = buf(comm, sendbuff, in_count, datatype),
            out = buf(comm, recvbuff, out_count, datatype), sc, sd, rc,
            rd] { return c.all_to_allv(in, sc, sd, out, rc, rd); };
  });
}

strataResult_t strataGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                            strataDataType_t datatype, int root, strataComm_t comm,
                            strataWork_t* work) {
  return submit("strataGather", comm, work, [&] {
    auto& c = comm_of(comm);
    return [&c, in = buf(comm, sendbuff, sendcount, datatype),
            out = buf(comm, recvbuff, c.rank() == root ? times_ranks(sendcount, c) : 0, datatype),
            root] { return c.gather(in, out, root); };
  });
}

strataResult_t strataScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                             strataDataType_t datatype, int root, strataComm_t comm,
                             strataWork_t* work) {
  return submit("strataScatter", comm, work, [&] {
    auto& c = comm_of(comm);
    return
        [&c, in = buf(comm, sendbuff, c.rank() == root ? times_ranks(recvcount, c) : 0, datatype),
         out = buf(comm, recvbuff, recvcount, datatype), root] { return c.scatter(in, out, root); };
  });
}

strataResult_t strataBarrier(strataComm_t comm, strataWork_t* work) {
  return submit("strataBarrier", comm, work, [&] {
    auto& c = comm_of(comm);
    return [&c] { return c.barrier(); };
  });
}

strataResult_t strataSend(const void* sendbuff, size_t count, strataDataType_t datatype, int peer,
                          strataComm_t comm, strataWork_t* work) {
  strata::PeerOp op{strata::PeerOp::send};
  const strataResult_t r = submit("strataSend", comm, work, [&] {
    auto& c = comm_of(comm);
    op = {strata::PeerOp::send, buf(comm, sendbuff, count, datatype), peer};
    return [&c, in = op.buffer, peer] { return c.send(in, peer); };
  });
  join_batch(r, comm, op);
  return r;
}

strataResult_t strataRecv(void* recvbuff, size_t count, strataDataType_t datatype, int peer,
                          strataComm_t comm, strataWork_t* work) {
  strata::PeerOp op{strata::PeerOp::recv};
  const strataResult_t r = submit("strataRecv", comm, work, [&] {
    auto& c = comm_of(comm);
    // C has no any-source receive: a negative peer is a mistake (rank 0's `rank - 1`), not a
    // wildcard that would match whichever rank sends first.
    require(
        peer >= 0, strataInvalidArgument,
        "peer " + std::to_string(peer) + " is out of range [0, " + std::to_string(c.size()) + ")");
    op = {strata::PeerOp::recv, buf(comm, recvbuff, count, datatype), peer};
    return [&c, out = op.buffer, peer] { return c.recv(out, peer); };
  });
  join_batch(r, comm, op);
  return r;
}

}  // extern "C"
