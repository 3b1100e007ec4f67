#include "perf_table.hpp"

#include <cstdio>
#include <tuple>

namespace perf {
namespace {

std::string fmt_time(double us) {
  char b[32];
  std::snprintf(b, sizeof b, us >= 10000 ? "%7.0f" : us >= 100 ? "%7.1f" : "%7.2f", us);
  return b;
}

std::string fmt_measure(const Measure& m) {
  char b[96];
  if (!m.available) {
    std::snprintf(b, sizeof b, "  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
    return b;
  }
  std::string wrong = m.wrong ? std::to_string(*m.wrong) : "N/A";
  std::snprintf(b, sizeof b, "  %7s  %6.2f  %6.2f  %5s", fmt_time(m.time_us).c_str(), m.algbw,
                m.busbw, wrong.c_str());
  return b;
}

}  // namespace

Measure measure(Coll c, int n, size_t bytes, double time_us) {
  Measure m;
  m.time_us = time_us;
  m.algbw = time_us > 0 ? double(bytes) / (time_us * 1e-6) / 1e9 : 0;
  m.busbw = m.algbw * bus_factor(c, n);
  return m;
}

std::string header(bool compare_mpi, bool compare_nccl) {
  std::string s =
      compare_mpi ? "# vs_mpi: Strata's out-of-place busbw / Open MPI's (above 1: Strata faster)\n"
                  : "";
  if (compare_nccl) {
    s += "# vs_nccl, vs_nccl_ip: raw NCCL's time / Strata's on the same device buffers, out of "
         "place and in place\n";
  }
  s +=
      "#\n"
      "#                                                              out-of-place                 "
      "      in-place          \n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   algbw   busbw #wrong";
  s += compare_mpi ? "  vs_mpi" : "";
  s += compare_nccl ? " vs_nccl vs_nccl_ip\n" : "\n";
  s += "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
       "(us)  (GB/s)  (GB/s)       ";
  s += compare_mpi ? "     (x)" : "";
  s += compare_nccl ? "     (x)        (x)\n" : "\n";
  return s;
}

std::string format_row(const Row& r, bool compare_mpi, bool compare_nccl) {
  char b[128];
  std::snprintf(b, sizeof b, "%12zu  %12zu  %8s  %6s  %6i", r.bytes, r.count, r.type, r.redop,
                r.root);
  std::string s = b + fmt_measure(r.out_of_place) + fmt_measure(r.in_place);
  if (compare_mpi) {
    if (r.mpi_busbw && *r.mpi_busbw > 0) {
      std::snprintf(b, sizeof b, "  %6.2f", r.out_of_place.busbw / *r.mpi_busbw);
    } else {
      std::snprintf(b, sizeof b, "  %6s", "N/A");
    }
    s += b;
  }
  if (compare_nccl) {
    for (auto [nccl, strata, width] : {std::tuple{r.nccl_us, r.out_of_place.time_us, 8},
                                       std::tuple{r.nccl_ip_us, r.in_place.time_us, 11}}) {
      if (nccl && strata > 0) {
        std::snprintf(b, sizeof b, "%*.2f", width, *nccl / strata);
      } else {
        std::snprintf(b, sizeof b, "%*s", width, "N/A");
      }
      s += b;
    }
  }
  return s + "\n";
}

std::string footer(const std::vector<Row>& rows) {
  long wrong = 0;
  double sum = 0;
  int count = 0;
  for (const auto& r : rows) {
    for (const Measure* m : {&r.out_of_place, &r.in_place}) {
      if (!m->available) continue;
      wrong += m->wrong.value_or(0);
      sum += m->busbw;
      ++count;
    }
  }
  char b[160];
  std::snprintf(b, sizeof b, "# Out of bounds values : %ld %s\n# Avg bus bandwidth    : %g \n#\n",
                wrong, wrong ? "FAILED" : "OK", count ? sum / count : 0.0);
  return b;
}

}  // namespace perf
