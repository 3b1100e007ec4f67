// strata-plan's inputs and checks: calibration files, a cluster from a strata-perf run, the
// layouts --check runs and how it reads several rounds of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "check.hpp"
#include "model/gpt_model.hpp"
#include "plan.hpp"
#include "request.hpp"
#include "strata/cost.hpp"

namespace {

using plan::Precision;
using plan_test::request;

}  // namespace

// A calibration file round-trips, with the small-matrix curve its rate was fitted under (a plan
// that measured the curve again would see a rate the fit never gave), and one that does not
// parse is named with its line.
TEST(Planner, ACalibrationFileRoundTripsAndABadOneIsNamed) {
  const std::string path = testing::TempDir() + "/calibration.txt";
  plan::Calibration k{1.5e11, 11, 9, 0.7, 2.5, 12, 300, 0.5, 0.2, 3.25};
  plan::save(k, path);
  const plan::Calibration back = plan::load(path);
  EXPECT_EQ(back.flops, k.flops);
  EXPECT_EQ(back.rows_half, k.rows_half);
  EXPECT_EQ(back.intra_gbs, k.intra_gbs);
  EXPECT_EQ(back.inter_us, k.inter_us);
  EXPECT_EQ(back.wait_us, k.wait_us);
  EXPECT_EQ(back.overlap_s_per_gb, k.overlap_s_per_gb);
  plan::ClusterSpec c = plan::cluster_of("2x8", "h100", Precision::bf16_mixed);
  plan::apply(back, c);
  EXPECT_EQ(c.flops, 1.5e11);
  EXPECT_EQ(c.rows_half, 11);
  EXPECT_EQ(c.inter.bandwidth_gbs, 2.5);
  EXPECT_EQ(c.overlap_s_per_gb, 3.25);
  k.overlap_s_per_gb = 0, k.rows_half = 0;  // one node's fit; no curve (GPUs)
  plan::save(k, path);
  EXPECT_EQ(plan::load(path).overlap_s_per_gb, 0);
  EXPECT_EQ(plan::load(path).rows_half, 0);
  { std::ofstream(path) << "flops = 1e12\nintra_gbs = fast\n"; }
  try {
    plan::load(path);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("line 2: 'intra_gbs = fast'"), std::string::npos)
        << e.what();
  }
}

// The live rate is a rank's: measured on the threads a trainer rank runs OpenBLAS with (one, or
// STRATA_GPT_BLAS_THREADS), not OpenBLAS's default of every core, which read 1.5x a rank's rate
// on two vCPUs.
TEST(Planner, TheLiveRateIsMeasuredOnARanksThreads) {
  const char* env = std::getenv("STRATA_GPT_BLAS_THREADS");
  const int rank_threads = env && *env ? std::atoi(env) : 1;
  const plan::ClusterSpec c = plan::cluster_of("1x2", "cpu", Precision::fp32);
  EXPECT_GT(c.flops, 0);
  EXPECT_EQ(gpt::blas_threads(), rank_threads);
}

// A strata-perf --json run gives the cluster it ran on and the link it crossed: rows made by the
// cost model from a known network come back as that network (within the fit's grid, 10^(1/20));
// files without what a link needs are named.
TEST(Planner, AStrataPerfRunGivesItsClusterAndTheLinkItCrossed) {
  const strata::Link truth{strata::PathClass::net, 0.125, 40};
  strata::GroupShape g;
  g.ranks = 4, g.nodes = 2, g.shared_memory = true;
  g.intra = plan::cluster_of("2x2", "cpu", Precision::fp32).intra, g.inter = truth;
  const std::string path = testing::TempDir() + "/perf.json";
  {
    std::ofstream f(path);
    f << "{\"collective\": \"all_reduce\", \"ranks\": 4, \"nodes\": 2, \"rows\": [\n";
    for (size_t bytes = 1024; bytes <= (16u << 20); bytes *= 4) {
      const double us = strata::estimate_cost("all_reduce", g, bytes).seconds * 1e6;
      f << "  {\"bytes\": " << bytes << ", \"out_of_place\": {\"time_us\": " << us
        << "}, \"in_place\": null},\n";
    }
    f << "]}\n";
  }
  const plan::ClusterSpec c = plan::cluster_from_perf(path, Precision::fp32);
  EXPECT_EQ(c.nodes, 2);
  EXPECT_EQ(c.per_node, 2);
  EXPECT_NEAR(c.inter.bandwidth_gbs, truth.bandwidth_gbs, 0.13 * truth.bandwidth_gbs);
  EXPECT_NEAR(c.inter.latency_us, truth.latency_us, 0.13 * truth.latency_us);
  EXPECT_NE(c.description.find("network link fitted to 8 sizes"), std::string::npos)
      << c.description;

  const std::pair<const char*, const char*> bad[] = {
      {"{\"collective\": \"all_reduce\", \"ranks\": 4, \"rows\": []}", "needs \"ranks\""},
      {"{\"collective\": \"all_reduce\", \"ranks\": 4, \"nodes\": 1, \"rows\": [{\"bytes\": 8, "
       "\"out_of_place\": {\"time_us\": 3}}]}",
       "fewer than two sizes"},
      {"{\"rows\": []}", "not a strata-perf --json file"}};
  for (const auto& [text, why] : bad) {
    { std::ofstream(path) << text; }
    try {
      plan::cluster_from_perf(path, Precision::fp32);
      ADD_FAILURE() << "no error for " << text;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

// that fits: a calibration then sees every kind of exchange.
TEST(Planner, CheckRunsCoverEveryAxisAndAControl) {
  for (int experts : {0, 4}) {  // dense: tp, pp, cp; with experts: tp, pp, cp, ep
    plan::Request r = request("small", "1x4", Precision::fp32, 32);
    r.model.config.experts = experts, r.model.config.top_k = 2;
    const std::vector<plan::Candidate> ranked = plan::plan(r);
    const std::vector<plan::Candidate> runs = plan::runs_to_check(ranked, 5);
    ASSERT_EQ(runs.size(), 6u);
    EXPECT_EQ(runs.front().name, ranked.front().name);
    for (int axis = 0; axis < 4; ++axis) {  // tp, pp, cp, ep: each that some layout has
      const auto has = [&](const plan::Candidate& c) {
        const gpt::TrainOptions& o = c.layout;
        return c.refusal.empty() && (axis == 0   ? o.tp
                                     : axis == 1 ? o.pp
                                     : axis == 2 ? o.cp
                                                 : o.ep) > 1;
      };
      EXPECT_TRUE(std::any_of(ranked.begin(), ranked.end(), has) == (experts > 0 || axis != 3))
          << "axis " << axis << ", experts " << experts;
      EXPECT_EQ(std::any_of(runs.begin(), runs.end(), has),
                std::any_of(ranked.begin(), ranked.end(), has))
          << "axis " << axis << ", experts " << experts;
    }
    const auto slowest = std::find_if(ranked.rbegin(), ranked.rend(),
                                      [](const plan::Candidate& c) { return c.refusal.empty(); });
    EXPECT_EQ(runs.back().name, slowest->name);
    for (size_t i = 0; i < runs.size(); ++i) {
      for (size_t j = 0; j < i; ++j) EXPECT_NE(runs[i].name, runs[j].name);
    }
  }
}

// Several rounds read as the middle one, whole (its bubble and bytes with its step, not a mix of
// rounds), with the range of the steps; a failed round is left out, and only a layout whose every
// round failed reports an error.
TEST(Planner, RoundsCountTheMiddleRoundWhole) {
  auto run = [](double step, double bubble) {
    plan::Measured m;
    m.step = m.step_min = m.step_max = step;
    m.bubble = bubble;
    return m;
  };
  plan::Measured failed;
  failed.error = "exit 1";
  const plan::Measured three =
      plan::middle_round({run(0.81, 0.1), failed, run(0.75, 0.3), run(0.92, 0.2)});
  EXPECT_EQ(three.step, 0.81);
  EXPECT_EQ(three.bubble, 0.1);
  EXPECT_EQ(three.rounds, 3);
  EXPECT_EQ(three.step_min, 0.75);
  EXPECT_EQ(three.step_max, 0.92);
  const plan::Measured two = plan::middle_round({run(0.81, 0.1), run(0.75, 0.3)});
  EXPECT_EQ(two.step, 0.75);  // the faster of two
  EXPECT_EQ(two.bubble, 0.3);
  EXPECT_TRUE(plan::middle_round({failed, failed}).error == "exit 1");
  EXPECT_FALSE(plan::middle_round({}).error.empty());
  // The table names the rounds and their range beside the layout's row.
  plan::Request r = request("tiny", "1x2", Precision::fp32, 8);
  const std::vector<plan::Candidate> ranked = plan::plan(r);
  const std::string table = plan::check_table({ranked.front()}, {three});
  EXPECT_NE(table.find(ranked.front().name), std::string::npos) << table;
  EXPECT_NE(table.find("(3 rounds, 750.0-920.0 ms)"), std::string::npos) << table;
}

// The check says in one line how far the top-ranked run measured from the fastest: the target
// the planner is held to (docs/planner.md), read off the runs, a failed run left out.
TEST(Planner, TheCheckSaysHowFarTheTopRankedMeasuredFromTheFastest) {
  const std::vector<plan::Candidate> ranked =
      plan::plan(request("tiny", "1x2", Precision::fp32, 8));
  ASSERT_GE(ranked.size(), 3u);
  const std::vector<plan::Candidate> ran(ranked.begin(), ranked.begin() + 3);
  auto run = [](double step) {
    plan::Measured m;
    m.step = step;
    return m;
  };
  plan::Measured failed;
  failed.error = "exit 1";
  EXPECT_EQ(plan::ranking_verdict(ran, {run(0.8), failed, run(0.9)}),
            "the top-ranked, " + ran[0].name + ", measured the fastest\n");
  EXPECT_EQ(plan::ranking_verdict(ran, {run(0.8), run(0.64), run(0.7)}),
            "the top-ranked, " + ran[0].name + ", measured 25 % slower than the fastest, " +
                ran[1].name + " (800.0 / 640.0 ms)\n");
  EXPECT_EQ(plan::ranking_verdict(ran, {failed, run(0.64), run(0.7)}), "");
}
