// strata-perf: the cluster bandwidth benchmark, in the manner of nccl-tests. Sweeps message sizes
// for one collective, prints time, algorithm and bus bandwidth out-of-place and in-place, checks
// every result element by element, and (with --compare mpi) runs Open MPI's collective on the
// same buffers in the same run.
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>

#include "node_reference.hpp"
#include "perf_case.hpp"
#include "perf_device.hpp"
#include "perf_moe.hpp"
#include "perf_moe_options.hpp"
#include "perf_mpi.hpp"
#include "perf_options.hpp"
#include "perf_plot.hpp"
#include "perf_table.hpp"
#include "strata/strata.hpp"

using namespace perf;
using Clock = std::chrono::steady_clock;

namespace {

double max_over_ranks(strata::Communicator& c, double v) {
  std::vector<double> x = {v};
  c.all_reduce(strata::buffer(x), strata::ReduceOp::max).wait();
  return x[0];
}

long sum_over_ranks(strata::Communicator& c, long v) {
  std::vector<int64_t> x = {v};
  c.all_reduce(strata::buffer(x), strata::ReduceOp::sum).wait();
  return long(x[0]);
}

// Average microseconds per call (max over ranks) of `iters` calls after `warmup`.
double time_strata(strata::Communicator& comm, const Case& c, strata::Buffer in, strata::Buffer out,
                   const Options& o) {
  for (int i = 0; i < o.warmup; ++i) c.issue(comm, in, out).wait();
  comm.barrier().wait();
  auto t0 = Clock::now();
  strata::Work last;
  for (int i = 0; i < o.iters; ++i) {
    if (o.fresh) rewrite(in);
    last = c.issue(comm, in, out);
    if (o.blocking || o.fresh) last.wait();
  }
  last.wait();  // operations on one communicator complete in issue order
  double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / o.iters;
  return max_over_ranks(comm, us);
}

// `dev`: the buffers' device twins (--device cuda), which the calls then use; the checks fill
// and read the host buffers, copied across.
Measure run_placement(strata::Communicator& comm, Case c, std::span<uint8_t> a,
                      std::span<uint8_t> b, const Options& o, const DeviceBuffers* dev) {
  if (!c.supported()) return Measure{false};
  const strata::Buffer host_in = c.input(a, b), host_out = c.output(a, b);
  const strata::Buffer in = dev ? dev->mirror(host_in, a, b) : host_in;
  const strata::Buffer out = dev ? dev->mirror(host_out, a, b) : host_out;
  Measure m = measure(c.coll, c.n, c.bytes(), time_strata(comm, c, in, out, o));
  if (o.check) {
    c.fill_input(host_in);
    if (dev) copy_memory(in.data, host_in.data, host_in.bytes());
    c.issue(comm, in, out).wait();
    if (dev) copy_memory(host_out.data, out.data, host_out.bytes());
    m.wrong = sum_over_ranks(comm, c.count_wrong(host_out));
  }
  return m;
}

// "# core-to-core round trip<when>: 139 ns (cpu 0 <-> cpu 1)", or that it could not be measured.
std::optional<double> print_round_trip(const char* when) {
  auto rt = core_round_trip();
  if (rt)
    std::printf("# core-to-core round trip%s: %.0f ns (%s)\n", when, rt->ns, rt->cpus.c_str());
  else
    std::printf("# core-to-core round trip%s: n/a (fewer than two CPUs)\n", when);
  return rt ? std::optional<double>(rt->ns) : std::nullopt;
}

std::string json_number(std::optional<double> v) { return v ? std::to_string(*v) : "null"; }

// Whether `path` ("" for none) can be written, asked before the run so that a typo costs no run.
bool writable(const std::string& path) {
  return path.empty() || bool(std::ofstream(path, std::ios::app));
}

bool write_json(const std::string& path, const Options& o, int n, int nodes,
                const std::vector<Row>& rows, std::optional<double> round_trip_start,
                std::optional<double> round_trip_end) {
  std::ofstream f(path);
  f << "{\"collective\": \"" << coll_name(o.coll) << "\", \"ranks\": " << n
    << ", \"nodes\": " << nodes << ", \"zipf_skew\": " << o.skew
    << ", \"core_round_trip_ns\": {\"start\": " << json_number(round_trip_start)
    << ", \"end\": " << json_number(round_trip_end) << "}, \"rows\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    auto m = [](const Measure& x) {
      if (!x.available) return std::string("null");
      return "{\"time_us\": " + std::to_string(x.time_us) +
             ", \"algbw\": " + std::to_string(x.algbw) + ", \"busbw\": " + std::to_string(x.busbw) +
             ", \"wrong\": " + (x.wrong ? std::to_string(*x.wrong) : "null") + "}";
    };
    f << "  {\"bytes\": " << r.bytes << ", \"count\": " << r.count << ", \"type\": \"" << r.type
      << "\", \"redop\": \"" << r.redop << "\", \"root\": " << r.root
      << ", \"out_of_place\": " << m(r.out_of_place) << ", \"in_place\": " << m(r.in_place)
      << ", \"mpi_busbw\": " << (r.mpi_busbw ? std::to_string(*r.mpi_busbw) : "null")
      << ", \"nccl_time_us\": " << (r.nccl_us ? std::to_string(*r.nccl_us) : "null")
      << ", \"nccl_in_place_time_us\": " << (r.nccl_ip_us ? std::to_string(*r.nccl_ip_us) : "null")
      << "}" << (i + 1 < rows.size() ? ",\n" : "\n");
  }
  f << "]}\n";
  f.close();
  return bool(f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && !std::strcmp(argv[1], "moe")) {
    if (argc >= 3 && (!std::strcmp(argv[2], "-h") || !std::strcmp(argv[2], "--help"))) {
      std::printf("%s", moe_usage().c_str());
      return 0;
    }
    return run_moe(argc, argv);
  }
  if (argc >= 2 && (!std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help"))) {
    std::printf("%s", usage().c_str());
    return 0;
  }
  std::string error;
  auto parsed = parse(argc, argv, error);
  if (!parsed) {
    std::fprintf(stderr, "strata-perf: %s\n%s", error.c_str(), usage().c_str());
    return 2;
  }
  const Options o = *parsed;
  if (o.help) {
    std::printf("%s", usage().c_str());
    return 0;
  }
  const bool under_mpirun = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
  if (o.compare_mpi && !under_mpirun) {
    std::fprintf(stderr, "strata-perf: --compare mpi needs the job to be started by mpirun\n");
    return 2;
  }
  // MPI must be initialised before Strata's bootstrap, which otherwise initialises and
  // finalises it itself.
  if (o.compare_mpi) MPI_Init(&argc, &argv);
  int rc = 0;
  try {
    auto comm = strata::Communicator::from_env();
    const int n = comm.size(), rank = comm.rank();
    if (has_root(o.coll) && o.root >= n) {
      if (rank == 0)
        std::fprintf(stderr, "strata-perf: -r %d is not a rank (world size %d)\n", o.root, n);
      throw 2;
    }
    // Rank 0 writes the files: every rank stops when it cannot.
    const bool outputs_ok = rank != 0 || (writable(o.json) && writable(o.plot));
    if (max_over_ranks(comm, outputs_ok ? 0 : 1) > 0) {
      if (rank == 0) {
        std::fprintf(
            stderr, "strata-perf: cannot write %s\n",
            writable(o.json) ? ("--plot " + o.plot).c_str() : ("--json " + o.json).c_str());
      }
      throw 2;
    }
    // The nodes the ranks span, for the JSON (strata-plan reads the links from it).
    const int nodes = o.json.empty() ? 1 : int(strata::JobTopology::gather(comm).nodes.size());
    char host[256] = "?";
    gethostname(host, sizeof host);
    std::vector<std::string> lines(n);
    if (rank == 0) {
      std::printf(
          "# strata-perf %s: nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %s%g warmup iters: "
          "%d iters: %d agg iters: 1 validation: %d graph: 0\n#\n",
          coll_name(o.coll), o.min_bytes, o.max_bytes, o.factor > 0 ? "" : "+",
          o.factor > 0 ? o.factor : double(o.step_bytes), o.warmup, o.iters, int(o.check));
      if (o.coll == Coll::all_to_allv) {
        std::printf("# all_to_allv: every rank sends rank j the share (j + 1)^-%g of its input\n",
                    o.skew);
      }
      std::printf("# Using devices\n");
    }
    for (int r = 0; r < n; ++r) {
      comm.barrier().wait();
      if (r == rank) {
        std::printf("#  Rank %2d Group  0 Pid %6d on %10s device  0 %s\n", rank, int(getpid()),
                    host, o.device ? "[cuda]" : "[host] cpu");
        std::fflush(stdout);
      }
    }
    comm.barrier().wait();
    std::optional<double> round_trip_start, round_trip_end;
    if (rank == 0) {
      std::printf("# memcpy reference: %.2f GB/s (1 thread), %.2f GB/s (2 threads)\n",
                  memcpy_gbps(1), memcpy_gbps(2));
      std::printf(
          "# streaming copy: %.2f GB/s (2 threads, stores around the cache: memory's "
          "rate for a copy)\n",
          streaming_copy_gbps(2));
      round_trip_start = print_round_trip("");
    }
    comm.barrier().wait();
    // all_to_allv's most popular rank receives up to every rank's whole input.
    const size_t out_bytes = o.coll == Coll::all_to_allv ? size_t(n) * o.max_bytes : o.max_bytes;
    // -R 2: from Communicator::alloc_symmetric, which peers on the node read unstaged.
    std::vector<uint8_t> a_plain, b_plain;
    strata::SymmetricBuffer a_sym, b_sym;
    std::span<uint8_t> a, b;
    if (o.symmetric) {
      a_sym = comm.alloc_symmetric(o.max_bytes + 64);
      b_sym = comm.alloc_symmetric(out_bytes + 64);
      a = {a_sym.as<uint8_t>(), a_sym.bytes()};
      b = {b_sym.as<uint8_t>(), b_sym.bytes()};
      if (rank == 0) std::printf("# symmetric buffers (-R 2)\n");
    } else {
      a_plain.resize(o.max_bytes + 64);
      b_plain.resize(out_bytes + 64);
      a = a_plain;
      b = b_plain;
    }
    std::unique_ptr<DeviceBuffers> dev;
    if (o.device) {
      dev = std::make_unique<DeviceBuffers>(a.size(), b.size());
      if (rank == 0) std::printf("# device buffers on %s\n", dev->name().c_str());
    }
    std::vector<Row> rows;
    if (rank == 0) std::printf("%s", header(o.compare_mpi, o.compare_nccl).c_str());
    for (auto dt : o.dtypes) {
      for (auto op : o.ops) {
        for (std::optional<size_t> size = o.min_bytes; size; size = next_size(*size, o)) {
          const size_t bytes = *size;
          Case c{o.coll, dt,   op, has_root(o.coll) ? o.root : -1, bytes / strata::dtype_size(dt),
                 false,  rank, n};
          if (o.coll == Coll::all_gather || o.coll == Coll::reduce_scatter ||
              o.coll == Coll::all_to_all) {
            c.count -= c.count % n;  // whole blocks per rank
          }
          c.skew = o.skew;
          if (o.coll == Coll::all_to_allv) c.lay_out();
          if (c.count == 0 && bytes > 0) continue;  // too small for a whole element per rank
          Row row;
          row.bytes = c.bytes();
          row.count = c.count;
          row.type = nccl_type_name(dt);
          row.redop = has_op(o.coll) ? strata::op_name(op).data() : "none";
          row.root = c.root;
          row.out_of_place = run_placement(comm, c, a, b, o, dev.get());
          c.in_place = true;
          row.in_place = run_placement(comm, c, a, b, o, dev.get());
          if (o.compare_mpi) {
            c.in_place = false;
            auto us = time_mpi(c, c.input(a, b), c.output(a, b), o.warmup, o.iters, o.fresh);
            if (us) row.mpi_busbw = measure(c.coll, n, c.bytes(), *us).busbw;
          }
          if (o.compare_nccl) {
            for (bool in_place : {false, true}) {
              c.in_place = in_place;
              auto us = time_nccl(comm, c, dev->mirror(c.input(a, b), a, b),
                                  dev->mirror(c.output(a, b), a, b), o.warmup, o.iters);
              const double worst = max_over_ranks(comm, us.value_or(-1));
              if (us && worst > 0) (in_place ? row.nccl_ip_us : row.nccl_us) = worst;
            }
          }
          if (rank == 0) {
            std::printf("%s", format_row(row, o.compare_mpi, o.compare_nccl).c_str());
            std::fflush(stdout);
          }
          rows.push_back(row);
        }
      }
    }
    // Measured again while the other ranks wait in a barrier: the host may have moved the vCPUs.
    comm.barrier().wait();
    if (rank == 0) {
      std::printf("%s", footer(rows).c_str());
      round_trip_end = print_round_trip(" at end");
      if (!o.json.empty() &&
          !write_json(o.json, o, n, nodes, rows, round_trip_start, round_trip_end)) {
        std::fprintf(stderr, "strata-perf: cannot write --json %s\n", o.json.c_str());
        rc = 1;
      }
      if (!o.plot.empty()) {
        std::string title =
            std::string("strata-perf ") + coll_name(o.coll) + ", " + std::to_string(n) + " ranks";
        if (!write_plot(o.plot, title, rows)) {
          std::fprintf(stderr, "strata-perf: cannot write --plot %s\n", o.plot.c_str());
          rc = 1;
        }
      }
    }
    comm.barrier().wait();
    for (const auto& r : rows) {
      if (r.out_of_place.wrong.value_or(0) || r.in_place.wrong.value_or(0)) rc = 1;
    }
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "strata-perf: %s\n", e.what());
    rc = 1;
  } catch (int code) {
    rc = code;
  } catch (const std::runtime_error& e) {  // the device buffers' CUDA errors
    std::fprintf(stderr, "strata-perf: %s\n", e.what());
    rc = 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "strata-perf: out of memory for buffers of -e %zu bytes\n", o.max_bytes);
    rc = 1;
  }
  if (o.compare_mpi) MPI_Finalize();
  return rc;
}
