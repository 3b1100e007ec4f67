// strata-perf's options and table layout, checked against nccl-tests' format by a fixed sample.
#include <gtest/gtest.h>

#include <set>

#include "perf_moe_options.hpp"
#include "perf_options.hpp"
#include "perf_table.hpp"

using namespace perf;

namespace {
std::optional<Options> parse_args(std::vector<std::string> args, std::string& err) {
  std::vector<char*> argv = {const_cast<char*>("strata-perf")};
  for (auto& a : args) argv.push_back(a.data());
  return parse(int(argv.size()), argv.data(), err);
}
std::optional<MoeOptions> parse_moe_args(std::vector<std::string> args, std::string& err) {
  std::vector<char*> argv = {const_cast<char*>("strata-perf")};
  for (auto& a : args) argv.push_back(a.data());
  return parse_moe(int(argv.size()), argv.data(), err);
}
}  // namespace

TEST(PerfOptions, SizesWithSuffixes) {
  EXPECT_EQ(parse_size("8"), 8u);
  EXPECT_EQ(parse_size("64K"), 65536u);
  EXPECT_EQ(parse_size("1M"), 1048576u);
  EXPECT_EQ(parse_size("2G"), size_t(2) << 30);
  EXPECT_EQ(parse_size("1.5K"), 1536u);
  EXPECT_FALSE(parse_size("12Q"));
  EXPECT_FALSE(parse_size(""));
  // Not silently something else: a fraction of a byte, not-a-number, beyond any buffer.
  EXPECT_FALSE(parse_size("1.5"));
  EXPECT_FALSE(parse_size("nan"));
  EXPECT_FALSE(parse_size("inf"));
  EXPECT_FALSE(parse_size("1e30"));
  EXPECT_FALSE(parse_size("-1"));
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

// Values that would loop for ever or be changed silently are refused by name; help is asked for
// anywhere among the flags.
TEST(PerfOptions, RefusesFlagsThatWouldLoopOrBeIgnored) {
  std::string err;
  const std::pair<std::vector<std::string>, std::string> refused[] = {
      {{"all_reduce", "-i", "0"}, "-i: '0' is not a step above 0 bytes"},
      {{"all_reduce", "-f", "nan"}, "-f: 'nan' is not a finite factor > 1"},
      {{"all_reduce", "-f", "inf"}, "-f: 'inf' is not a finite factor > 1"},
      {{"all_reduce", "-f", "1"}, "-f: '1' is not a finite factor > 1"},
      {{"all_reduce", "-n", "0"}, "-n: '0' is not a number of iterations above 0"},
      {{"all_reduce", "-c", "2"}, "-c: '2' is not 0 or 1"},
      {{"all_reduce", "-z", "7"}, "-z: '7' is not 0 or 1"}};
  for (const auto& [args, why] : refused) {
    EXPECT_FALSE(parse_args(args, err)) << why;
    EXPECT_EQ(err, why);
  }
  // As in nccl-tests, -o and -r are taken by every collective, used where they mean something.
  const auto b = parse_args({"broadcast", "-o", "all", "-r", "1"}, err);
  ASSERT_TRUE(b) << err;
  EXPECT_EQ(b->ops, std::vector<strata::ReduceOp>{strata::ReduceOp::sum});
  EXPECT_EQ(b->root, 1);
  for (const auto& args : std::vector<std::vector<std::string>>{{"all_reduce", "--help"},
                                                                {"all_reduce", "-n", "1", "-h"}}) {
    const auto o = parse_args(args, err);
    ASSERT_TRUE(o) << err;
    EXPECT_TRUE(o->help);
  }
  std::string moe_err;
  const auto m = parse_moe_args({"moe", "--tokens", "64", "--help"}, moe_err);
  ASSERT_TRUE(m) << moe_err;
  EXPECT_TRUE(m->help);
  EXPECT_FALSE(parse_moe_args({"moe", "-n", "0"}, moe_err));
  EXPECT_EQ(moe_err, "-n: '0' is not a number of iterations above 0");
}

// The sweep always moves on (a factor near 1 on a small size rounded back to the same size and
// ran it for ever), ends at -e, and ends after a size of 0.
TEST(PerfOptions, TheSweepAlwaysMovesOnAndEndsAtTheLargestSize) {
  auto sweep = [](std::vector<std::string> args) {
    std::string err;
    const auto o = parse_args(args, err);
    EXPECT_TRUE(o) << err;
    std::vector<size_t> sizes;
    for (std::optional<size_t> s = o->min_bytes; s && sizes.size() < 100; s = next_size(*s, *o))
      sizes.push_back(*s);
    return sizes;
  };
  EXPECT_EQ(sweep({"all_reduce", "-b", "1", "-e", "8", "-f", "1.5"}),
            (std::vector<size_t>{1, 2, 3, 4, 6}));
  EXPECT_EQ(sweep({"all_reduce", "-b", "8", "-e", "64", "-f", "2"}),
            (std::vector<size_t>{8, 16, 32, 64}));
  EXPECT_EQ(sweep({"all_reduce", "-b", "8", "-e", "30", "-i", "10"}),
            (std::vector<size_t>{8, 18, 28}));
  EXPECT_EQ(sweep({"all_reduce", "-b", "0", "-e", "64"}), (std::vector<size_t>{0}));
  EXPECT_EQ(sweep({"all_reduce", "-b", "4G", "-e", "4G", "-f", "1e300"}),
            (std::vector<size_t>{size_t(4) << 30}));
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

TEST(PerfMoe, OptionsAndTheirErrors) {
  std::string err;
  auto m = parse_moe_args({"moe", "--tokens", "100", "--hidden", "64", "--top-k", "3", "--experts",
                           "12", "--skew", "zipf:0.5", "-d", "f32", "-n", "3"},
                          err);
  ASSERT_TRUE(m) << err;
  EXPECT_EQ(m->tokens, 100);
  EXPECT_EQ(m->hidden, 64);
  EXPECT_EQ(m->top_k, 3);
  EXPECT_EQ(m->experts, 12);
  EXPECT_DOUBLE_EQ(m->skew, 0.5);
  EXPECT_EQ(m->dtype, strata::DataType::f32);
  EXPECT_EQ(m->iters, 3);
  EXPECT_FALSE(parse_moe_args({"moe", "--top-k", "9", "--experts", "8"}, err));
  EXPECT_EQ(err, "--top-k 9 exceeds --experts 8 (a token goes to k distinct experts)");
  EXPECT_FALSE(parse_moe_args({"moe", "--tokens", "0"}, err));
  EXPECT_EQ(err, "--tokens: '0' is not a positive integer");
  EXPECT_FALSE(parse_moe_args({"moe", "-d", "i8"}, err));
  EXPECT_EQ(err, "-d: 'i8' is not a dtype (bf16 f16 f32)");
}

// Routing is a function of the options and the rank (every rank derives every other's), each
// token's k experts are distinct, and skew concentrates tokens on fewer experts.
TEST(PerfMoe, RoutingIsDeterministicDistinctAndSkewed) {
  MoeOptions o;
  o.tokens = 4000, o.top_k = 2, o.experts = 8;
  const std::vector<int> a = route(o, 1), b = route(o, 1), c = route(o, 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  ASSERT_EQ(a.size(), 8000u);
  std::vector<int> load(8);
  for (size_t t = 0; t < 4000; ++t) {
    EXPECT_NE(a[2 * t], a[2 * t + 1]) << "token " << t;
    for (int k = 0; k < 2; ++k) {
      ASSERT_GE(a[2 * t + k], 0);
      ASSERT_LT(a[2 * t + k], 8);
      ++load[size_t(a[2 * t + k])];
    }
  }
  for (int l : load) EXPECT_NEAR(l, 1000, 150) << "uniform routing";
  o.skew = 2;
  std::vector<int> skewed(8);
  for (int e : route(o, 1)) ++skewed[size_t(e)];
  // The most popular expert takes a token's first choice about 1 / 1.53 of the time.
  EXPECT_GT(*std::max_element(skewed.begin(), skewed.end()), 2500);
  EXPECT_LT(*std::min_element(skewed.begin(), skewed.end()), 300);
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
  // --compare nccl: raw NCCL's time over Strata's, defined on one rank where busbw is 0.
  // Out of place, then in place (which has no Strata time here).
  r.nccl_us = 5242.88;
  r.nccl_ip_us = 1000;
  EXPECT_EQ(format_row(r, false, true),
            "    33554432       8388608     float     sum      -1    10486    3.20    4.80      0"
            "      N/A     N/A     N/A    N/A    0.50        N/A\n");
  r.in_place = measure(Coll::all_reduce, 4, 32u << 20, 4000);
  EXPECT_NE(format_row(r, false, true).find("    0.50       0.25\n"), std::string::npos);
  r.nccl_us.reset();
  EXPECT_NE(format_row(r, false, true).find("     N/A       0.25\n"), std::string::npos);
  EXPECT_NE(header(false, true).find("#wrong vs_nccl vs_nccl_ip\n"), std::string::npos);
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
