// strata-perf moe: one mixture-of-experts layer's dispatch and combine (perf_moe_options.hpp, and
// `strata-perf moe --help`, say what is measured). nccl-tests has no such test; DeepEP's tests
// time the same two phases on GPUs.
#include "perf_moe.hpp"

#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>

#include "perf_moe_options.hpp"
#include "strata/strata.hpp"

namespace perf {
namespace {

using Clock = std::chrono::steady_clock;

// Byte b of the row that rank `src` sends for token `t` to expert `e`: every row distinct.
uint8_t row_byte(int src, int t, int e, size_t b) {
  return uint8_t(
      (uint32_t(src) * 0x9E3779B1u ^ uint32_t(t) * 0x85EBCA6Bu ^ uint32_t(e) * 0xC2B2AE35u) +
      uint32_t(b) * 131u);
}

// One rank's part of the layer: which rows it sends where, and which it gets, in order. Rows go
// to their expert's rank grouped by expert, tokens ascending within an expert.
struct Plan {
  int local;                                 // experts per rank
  std::vector<int32_t> expert_rows;          // [E]: rows this rank sends each expert
  std::vector<size_t> send_rows;             // [n]: rows to each rank
  std::vector<std::pair<int, int>> sent;     // (token, expert) in send order
  std::vector<std::array<int, 3>> received;  // (source, token, expert) in receive order
};

Plan plan(const MoeOptions& o, int n, int me) {
  Plan p{o.experts / n, std::vector<int32_t>(size_t(o.experts)), std::vector<size_t>(n), {}, {}};
  for (int src = 0; src < n; ++src) {
    const std::vector<int> to = route(o, src);
    std::vector<std::vector<int>> tokens_of(size_t(o.experts));  // tokens ascending per expert
    for (size_t i = 0; i < to.size(); ++i) tokens_of[size_t(to[i])].push_back(int(i) / o.top_k);
    for (int e = 0; e < o.experts; ++e) {  // expert order is rank order: e / local is its rank
      for (int t : tokens_of[size_t(e)]) {
        if (src == me) {
          p.sent.push_back({t, e});
          ++p.expert_rows[size_t(e)];
          ++p.send_rows[size_t(e / p.local)];
        }
        if (e / p.local == me) p.received.push_back({src, t, e});
      }
    }
  }
  return p;
}

// Counts and displacements in elements of `h` per row.
struct Layout {
  std::vector<size_t> counts, displs;
};
void lay_out(Layout& l, const std::vector<size_t>& rows, size_t h) {
  l.counts.resize(rows.size()), l.displs.resize(rows.size());
  size_t at = 0;
  for (size_t j = 0; j < rows.size(); ++j) {
    l.counts[j] = rows[j] * h, l.displs[j] = at, at += rows[j] * h;
  }
}
Layout layout(const std::vector<size_t>& rows, size_t h) {
  Layout l;
  lay_out(l, rows, h);
  return l;
}

struct Phases {
  double dispatch_us = 0, combine_us = 0;
};

// Times `iters` layers after `warmup`, each: counts (all_to_all), rows (all_to_allv), rows back.
// `exchange` runs one phase: 0 counts, 1 dispatch, 2 combine.
template <typename Exchange>
Phases time_layers(const MoeOptions& o, Exchange exchange) {
  Phases total;
  for (int i = 0; i < o.warmup + o.iters; ++i) {
    const auto t0 = Clock::now();
    exchange(0);
    exchange(1);
    const auto t1 = Clock::now();
    exchange(2);
    const auto t2 = Clock::now();
    if (i < o.warmup) continue;
    total.dispatch_us += std::chrono::duration<double, std::micro>(t1 - t0).count() / o.iters;
    total.combine_us += std::chrono::duration<double, std::micro>(t2 - t1).count() / o.iters;
  }
  return total;
}

double max_over(strata::Communicator& c, double v) {
  std::vector<double> x{v};
  c.all_reduce(strata::buffer(x), strata::ReduceOp::max).wait();
  return x[0];
}

}  // namespace

int run_moe(int argc, char** argv) {
  std::string error;
  const auto parsed = parse_moe(argc, argv, error);
  if (!parsed) {
    std::fprintf(stderr, "strata-perf moe: %s\n%s", error.c_str(), moe_usage().c_str());
    return 2;
  }
  const MoeOptions o = *parsed;
  if (o.help) {
    std::printf("%s", moe_usage().c_str());
    return 0;
  }
  if (o.compare_mpi && !std::getenv("OMPI_COMM_WORLD_SIZE")) {
    std::fprintf(stderr, "strata-perf moe: --compare mpi needs the job to be started by mpirun\n");
    return 2;
  }
  if (o.compare_mpi)
    MPI_Init(&argc, &argv);  // before Strata's bootstrap (strata_perf.cpp says why)
  int rc = 0;
  try {
    auto comm = strata::Communicator::from_env();
    const int n = comm.size(), me = comm.rank();
    if (o.experts % n != 0) {
      if (me == 0) {
        std::fprintf(stderr, "strata-perf moe: --experts %d is not a multiple of the %d ranks\n",
                     o.experts, n);
      }
      throw 2;
    }
    Plan p = plan(o, n, me);
    const size_t es = strata::dtype_size(o.dtype), h = size_t(o.hidden), row = h * es;
    std::vector<size_t> recv_rows(n);
    for (const auto& r : p.received) ++recv_rows[r[0]];
    const Layout out = layout(p.send_rows, h), in = layout(recv_rows, h);
    std::vector<uint8_t> send(p.sent.size() * row), recv(p.received.size() * row),
        back(send.size());
    for (size_t i = 0; i < p.sent.size(); ++i)
      for (size_t b = 0; b < row; ++b)
        send[i * row + b] = row_byte(me, p.sent[i].first, p.sent[i].second, b);
    std::vector<int32_t> counts_in(p.expert_rows.size());
    std::vector<size_t> got_rows(n);
    auto buf = [&](std::vector<uint8_t>& v) {
      return strata::Buffer{v.data(), v.size() / es, o.dtype};
    };

    // Strata: the receive layout comes from the counts exchanged, as a MoE layer's does.
    Layout got = in;
    const Phases strata_t = time_layers(o, [&](int phase) {
      if (phase == 0) {
        comm.all_to_all(strata::buffer(p.expert_rows), strata::buffer(counts_in)).wait();
        std::fill(got_rows.begin(), got_rows.end(), 0);
        for (size_t i = 0; i < counts_in.size(); ++i)
          got_rows[i / size_t(p.local)] += size_t(counts_in[i]);
        lay_out(got, got_rows, h);  // in place: no allocation in the timed loop
      } else if (phase == 1) {
        comm.all_to_allv(buf(send), out.counts, out.displs, buf(recv), got.counts, got.displs)
            .wait();
      } else {
        comm.all_to_allv(buf(recv), got.counts, got.displs, buf(back), out.counts, out.displs)
            .wait();
      }
    });
    long wrong = 0;
    if (o.check) {
      if (got.counts != in.counts) ++wrong;  // the counts exchanged disagree with the routing
      for (size_t i = 0; i < p.received.size(); ++i) {
        const auto& [src, t, e] = p.received[i];
        for (size_t b = 0; b < row; ++b) {
          if (recv[i * row + b] != row_byte(src, t, e, b)) {
            ++wrong;
            break;
          }
        }
      }
      if (back != send) ++wrong;
    }
    std::vector<int64_t> wrong_all{wrong};
    comm.all_reduce(strata::buffer(wrong_all), strata::ReduceOp::sum).wait();
    const double dispatch_us = max_over(comm, strata_t.dispatch_us);
    const double combine_us = max_over(comm, strata_t.combine_us);

    double mpi_dispatch = 0, mpi_combine = 0;
    const bool mpi_fits = std::max(send.size(), recv.size()) <= size_t(INT32_MAX);
    if (o.compare_mpi && !mpi_fits && me == 0) {
      std::printf("# no Open MPI figures: its counts are ints, and a buffer exceeds 2 GiB\n");
    }
    if (o.compare_mpi && mpi_fits) {
      std::vector<int> sc, sd, rcv, rd;  // bytes, as ints (the sizes are checked to fit)
      for (int j = 0; j < n; ++j) {
        sc.push_back(int(out.counts[j] * es)), sd.push_back(int(out.displs[j] * es));
        rcv.push_back(int(in.counts[j] * es)), rd.push_back(int(in.displs[j] * es));
      }
      const Phases m = time_layers(o, [&](int phase) {
        if (phase == 0) {
          MPI_Alltoall(p.expert_rows.data(), p.local, MPI_INT32_T, counts_in.data(), p.local,
                       MPI_INT32_T, MPI_COMM_WORLD);
        } else if (phase == 1) {
          MPI_Alltoallv(send.data(), sc.data(), sd.data(), MPI_BYTE, recv.data(), rcv.data(),
                        rd.data(), MPI_BYTE, MPI_COMM_WORLD);
        } else {
          MPI_Alltoallv(recv.data(), rcv.data(), rd.data(), MPI_BYTE, back.data(), sc.data(),
                        sd.data(), MPI_BYTE, MPI_COMM_WORLD);
        }
      });
      mpi_dispatch = max_over(comm, m.dispatch_us);
      mpi_combine = max_over(comm, m.combine_us);
    }

    // What the ranks move: rows each dispatches to other ranks, rows each receives.
    std::vector<int64_t> remote{int64_t(p.sent.size() - p.send_rows[me])},
        incoming{int64_t(p.received.size())};
    std::vector<int64_t> all_remote(n), all_incoming(n);
    comm.all_gather(strata::buffer(remote), strata::buffer(all_remote)).wait();
    comm.all_gather(strata::buffer(incoming), strata::buffer(all_incoming)).wait();
    if (me == 0) {
      const double bytes = double(o.tokens) * o.top_k * double(row);
      std::printf(
          "# strata-perf moe: %d ranks, tokens %d, hidden %d, top-k %d, experts %d (%d per rank), "
          "%s, skew zipf:%g, %d iterations\n",
          n, o.tokens, o.hidden, o.top_k, o.experts, p.local, strata::dtype_name(o.dtype).data(),
          o.skew, o.iters);
      std::printf(
          "# a rank dispatches T k = %lld rows of %zu B (%.2f MB); to other ranks %lld-%lld rows; "
          "receives %lld-%lld rows\n",
          (long long)(o.tokens) * o.top_k, row, bytes / 1e6,
          (long long)*std::min_element(all_remote.begin(), all_remote.end()),
          (long long)*std::max_element(all_remote.begin(), all_remote.end()),
          (long long)*std::min_element(all_incoming.begin(), all_incoming.end()),
          (long long)*std::max_element(all_incoming.begin(), all_incoming.end()));
      std::printf(
          "# GB/s: the T k rows a rank dispatches (or gets back), over the time; vs_mpi: Open "
          "MPI's time / Strata's\n");
      std::printf("#  phase       time_us      GB/s   #wrong%s\n",
                  o.compare_mpi ? "    mpi_us  vs_mpi" : "");
      auto line = [&](const char* phase, double us, double mpi_us) {
        std::printf("   %-9s %9.1f %9.2f %8lld", phase, us, bytes / us / 1e3,
                    (long long)wrong_all[0]);
        if (o.compare_mpi) std::printf(" %9.1f %7.2f", mpi_us, mpi_us / us);
        std::printf("\n");
      };
      line("dispatch", dispatch_us, mpi_dispatch);
      line("combine", combine_us, mpi_combine);
    }
    rc = wrong_all[0] ? 1 : 0;
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "strata-perf moe: %s\n", e.what());
    rc = 1;
  } catch (int code) {
    rc = code;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "strata-perf moe: out of memory for the rows of --tokens %d x --top-k %d "
                 "x --hidden %d\n",
                 o.tokens, o.top_k, o.hidden);
    rc = 1;
  }
  if (o.compare_mpi) MPI_Finalize();
  return rc;
}

}  // namespace perf
