// strata-perf's options and table layout, checked against nccl-tests' format by a fixed sample.
#include <gtest/gtest.h>

#include "perf_options.hpp"
#include "perf_table.hpp"

using namespace perf;

namespace {
std::optional<Options> parse_args(std::vector<std::string> args, std::string& err) {
  std::vector<char*> argv = {const_cast<char*>("strata-perf")};
  for (auto& a : args) argv.push_back(a.data());
  return parse(int(argv.size()), argv.data(), err);
}
}  // namespace

TEST(PerfOptions, SizesWithSuffixes) {
  EXPECT_EQ(parse_size("8"), 8u);
  EXPECT_EQ(parse_size("64K"), 65536u);
  EXPECT_EQ(parse_size("1M"), 1048576u);
  EXPECT_EQ(parse_size("2G"), size_t(2) << 30);
  EXPECT_FALSE(parse_size("12Q"));
  EXPECT_FALSE(parse_size(""));
}

TEST(PerfOptions, ParsesFlagsAndRejectsBadOnesByName) {
  std::string err;
  auto o = parse_args({"reduce_scatter", "-b", "1K", "-e", "4M", "-f", "4", "-n", "7", "-w", "2",
                       "-c", "0", "-d", "all", "-o", "max", "-z", "1"},
                      err);
  ASSERT_TRUE(o) << err;
  EXPECT_EQ(o->coll, Coll::reduce_scatter);
  EXPECT_EQ(o->min_bytes, 1024u);
  EXPECT_EQ(o->max_bytes, 4u << 20);
  EXPECT_EQ(o->factor, 4);
  EXPECT_EQ(o->iters, 7);
  EXPECT_FALSE(o->check);
  EXPECT_TRUE(o->blocking);
  EXPECT_EQ(o->dtypes.size(), 8u);
  ASSERT_EQ(o->ops.size(), 1u);
  EXPECT_EQ(o->ops[0], strata::ReduceOp::max);
  EXPECT_FALSE(parse_args({"all_reduce", "-b", "12Q"}, err));
  EXPECT_NE(err.find("-b"), std::string::npos) << err;
  EXPECT_FALSE(parse_args({"all_reduce", "-d", "f128"}, err));
  EXPECT_NE(err.find("-d"), std::string::npos) << err;
  EXPECT_FALSE(parse_args({"allreduce"}, err));
  EXPECT_NE(err.find("allreduce"), std::string::npos) << err;
  EXPECT_FALSE(parse_args({"all_reduce", "-b", "2M", "-e", "1M"}, err));
}

TEST(PerfOptions, SkewIsAZipfExponentForAllToAllvOnly) {
  std::string err;
  auto o = parse_args({"all_to_allv", "--skew", "zipf:1.2"}, err);
  ASSERT_TRUE(o) << err;
  EXPECT_EQ(o->coll, Coll::all_to_allv);
  EXPECT_DOUBLE_EQ(o->skew, 1.2);
  for (const char* bad : {"zipf", "zipf:", "zipf:-1", "zipf:1x", "pareto:1"}) {
    EXPECT_FALSE(parse_args({"all_to_allv", "--skew", bad}, err)) << bad;
    EXPECT_NE(err.find("--skew: '" + std::string(bad) + "' is not zipf:S"), std::string::npos)
        << err;
  }
  EXPECT_FALSE(parse_args({"all_to_all", "--skew", "zipf:1"}, err));
  EXPECT_EQ(err, "--skew applies to all_to_allv only");
}

TEST(PerfOptions, BusBandwidthFactors) {
  EXPECT_DOUBLE_EQ(bus_factor(Coll::all_reduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(Coll::all_gather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(Coll::reduce_scatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_factor(Coll::all_to_all, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_factor(Coll::all_to_allv, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_factor(Coll::broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(Coll::sendrecv, 8), 1.0);
}

TEST(PerfTable, MatchesTheNcclTestsLayout) {
  Row r;
  r.bytes = 33554432;
  r.count = 8388608;
  r.type = "float";
  r.redop = "sum";
  r.root = -1;
  r.out_of_place = measure(Coll::all_reduce, 4, r.bytes, 10485.76);
  r.out_of_place.wrong = 0;
  r.in_place = measure(Coll::all_reduce, 4, r.bytes, 52.25);
  r.in_place.wrong = 3;
  // algbw = 33554432 B / 10485.76 us = 3.20 GB/s; busbw = 1.5x = 4.80.
  EXPECT_EQ(format_row(r, false),
            "    33554432       8388608     float     sum      -1    10486    3.20    4.80      0"
            "    52.25  642.19  963.29      3\n");
  r.in_place = Measure{false};
  r.mpi_busbw = 1.6;
  EXPECT_EQ(format_row(r, true),
            "    33554432       8388608     float     sum      -1    10486    3.20    4.80      0"
            "      N/A     N/A     N/A    N/A    3.00\n");
  EXPECT_EQ(header(false).substr(0, 2), "#\n");
  EXPECT_NE(header(false).find("#       size         count      type   redop    root     time   "
                               "algbw   busbw #wrong     time   algbw   busbw #wrong\n"),
            std::string::npos);
  EXPECT_NE(header(true).find("#wrong  vs_mpi\n"), std::string::npos);
}

TEST(PerfTable, FooterCountsWrongValuesAndAveragesBusBandwidth) {
  Row a, b;
  a.out_of_place = measure(Coll::broadcast, 2, 1000000, 1000);  // 1 GB/s
  a.out_of_place.wrong = 0;
  a.in_place = measure(Coll::broadcast, 2, 1000000, 500);  // 2 GB/s
  a.in_place.wrong = 0;
  b.out_of_place = measure(Coll::broadcast, 2, 1000000, 250);  // 4 GB/s
  b.out_of_place.wrong = 2;
  b.in_place = Measure{false};
  EXPECT_EQ(footer({a}), "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.5 \n#\n");
  EXPECT_EQ(footer({a, b}),
            "# Out of bounds values : 2 FAILED\n# Avg bus bandwidth    : 2.33333 \n#\n");
}
