#include "perf_mpi.hpp"

#include <mpi.h>

#include <cstring>

namespace perf {
namespace {

std::optional<MPI_Datatype> mpi_type(strata::DataType t) {
  switch (t) {
    case strata::DataType::f32:
      return MPI_FLOAT;
    case strata::DataType::f64:
      return MPI_DOUBLE;
    case strata::DataType::i8:
      return MPI_INT8_T;
    case strata::DataType::u8:
      return MPI_UINT8_T;
    case strata::DataType::i32:
      return MPI_INT32_T;
    case strata::DataType::i64:
      return MPI_INT64_T;
    default:
      return std::nullopt;  // no standard 16-bit float types in MPI
  }
}

std::optional<MPI_Op> mpi_op(strata::ReduceOp op) {
  switch (op) {
    case strata::ReduceOp::sum:
      return MPI_SUM;
    case strata::ReduceOp::prod:
      return MPI_PROD;
    case strata::ReduceOp::min:
      return MPI_MIN;
    case strata::ReduceOp::max:
      return MPI_MAX;
    default:
      return std::nullopt;
  }
}

}  // namespace

std::optional<double> time_mpi(const Case& c, strata::Buffer in, strata::Buffer out, int warmup,
                               int iters, bool fresh) {
  auto t = mpi_type(c.dtype);
  auto op = mpi_op(c.op);
  if (!t || (has_op(c.coll) && !op)) return std::nullopt;
  const int n = c.n, r = c.rank;
  // all_to_allv's layout as MPI takes it (int counts; the count check below bounds them).
  std::vector<int> sc, sd, rc, rd;
  for (size_t j = 0; j < c.v.send_counts.size(); ++j) {
    sc.push_back(int(c.v.send_counts[j]));
    sd.push_back(int(c.v.send_displs[j]));
    rc.push_back(int(c.v.recv_counts[j]));
    rd.push_back(int(c.v.recv_displs[j]));
  }
  auto once = [&] {
    const int cnt = int(c.count), per = int(c.count / n);
    switch (c.coll) {
      case Coll::all_reduce:
        MPI_Allreduce(in.data, out.data, cnt, *t, *op, MPI_COMM_WORLD);
        break;
      case Coll::all_gather:
        MPI_Allgather(in.data, per, *t, out.data, per, *t, MPI_COMM_WORLD);
        break;
      case Coll::reduce_scatter:
        MPI_Reduce_scatter_block(in.data, out.data, per, *t, *op, MPI_COMM_WORLD);
        break;
      case Coll::all_to_all:
        MPI_Alltoall(in.data, per, *t, out.data, per, *t, MPI_COMM_WORLD);
        break;
      case Coll::all_to_allv:
        MPI_Alltoallv(in.data, sc.data(), sd.data(), *t, out.data, rc.data(), rd.data(), *t,
                      MPI_COMM_WORLD);
        break;
      case Coll::broadcast:
        // MPI_Bcast has one buffer; the root's copy makes it the out-of-place call it is
        // compared with (timing MPI in place against Strata out of place flattered MPI).
        if (r == c.root) std::memcpy(out.data, in.data, out.bytes());
        MPI_Bcast(out.data, cnt, *t, c.root, MPI_COMM_WORLD);
        break;
      case Coll::reduce:
        MPI_Reduce(in.data, out.data, cnt, *t, *op, c.root, MPI_COMM_WORLD);
        break;
      case Coll::sendrecv:
        MPI_Sendrecv(in.data, cnt, *t, (r + 1) % n, 0, out.data, cnt, *t, (r + n - 1) % n, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        break;
    }
  };
  if (c.count > size_t(INT32_MAX) || c.out_count() > size_t(INT32_MAX)) return std::nullopt;
  for (int i = 0; i < warmup; ++i) once();
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i) {
    if (fresh) rewrite(in);
    once();
  }
  double us = (MPI_Wtime() - t0) * 1e6 / iters, worst = 0;
  MPI_Allreduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

}  // namespace perf
