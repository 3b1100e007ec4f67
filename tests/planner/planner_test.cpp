// strata-plan's models against the figures the field teaches (walkthroughs, the decision guide),
// the trainer's formulas, and bad input; strata::estimate_cost against the library's choice; the
// time model's terms. Inputs and checks: planner_check_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "plan.hpp"
#include "request.hpp"
#include "strata/cost.hpp"
#include "strata/error.hpp"
#include "validate/layout_formulas.hpp"
#include "validate/layouts.hpp"

namespace {

using plan::Precision;
using plan_test::request;

// A figure in GB to the decimals a source prints it with.
double gb(double bytes, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(bytes / 1e9 * scale) / scale;
}

plan::Candidate best(const std::vector<plan::Candidate>& ranked) {
  EXPECT_FALSE(ranked.empty());
  EXPECT_TRUE(ranked.front().refusal.empty()) << ranked.front().refusal;
  return ranked.front();
}

}  // namespace

// "A 7B model in fp32 with Adam needs 112 GB (16 N)"; "a 70B model's fp16 weights are 140 GB".
TEST(Planner, TheWalkthroughsModelStates) {
  EXPECT_EQ(plan::model_state(7e9, Precision::fp32, 0, 1).total(), 112e9);
  EXPECT_EQ(plan::model_state(70e9, Precision::bf16_mixed, 0, 1).params, 140e9);
  // 175B on 1,024 A100-80GB as TP 8 x PP 16 x DP 8: parameters 2.7 GB, gradients 2.7 GB, Adam
  // state 16.4 GB per GPU, the model divided evenly over tp x pp.
  const plan::Memory even = plan::model_state(175e9 / (8 * 16), Precision::bf16_mixed, 0, 8);
  EXPECT_EQ(gb(even.params, 1), 2.7);
  EXPECT_EQ(gb(even.grads, 1), 2.7);
  EXPECT_EQ(gb(even.optimizer, 1), 16.4);
  // ZeRO shards the optimizer state, then the gradients, then the weights.
  const plan::Memory z3 = plan::model_state(8e9, Precision::bf16_mixed, 3, 8);
  EXPECT_EQ(z3.params, 2e9);
  EXPECT_EQ(z3.grads, 2e9);
  EXPECT_EQ(z3.optimizer, 12e9);
}

// The same layout of the 175b preset (GPT-3's shape, 174.6 B parameters), stage by stage: a
// middle stage holds 6 blocks (2.7, 2.7, 16.3 GB: the walkthrough's 16.4 divides 175 B evenly,
// embeddings included); the first holds the embeddings too. "About 28 GB per GPU with activations
// and buffers": with full recomputation (Megatron-LM's 2021 runs, before sequence parallelism).
TEST(Planner, TheWalkthroughs175BLayout) {
  plan::Request r = request("175b", "128x8", Precision::bf16_mixed, 1536);
  r.cluster.device = "a100", r.cluster.memory_bytes = 80e9;
  r.layout = "tp8.pp16.dp8.m192.recompute";
  const auto ranked = plan::plan(r);
  ASSERT_EQ(ranked.size(), 1u);
  const plan::Candidate& c = ranked[0];
  EXPECT_EQ(c.refusal, "");
  const plan::Memory middle = plan::memory_of(c.layout, 1024, 1, Precision::bf16_mixed);
  EXPECT_EQ(gb(middle.params, 1), 2.7);
  EXPECT_EQ(gb(middle.grads, 1), 2.7);
  EXPECT_EQ(gb(middle.optimizer, 1), 16.3);
  EXPECT_NEAR(c.estimate.memory.total() / 1e9, 28, 1.5);
  EXPECT_EQ(c.estimate.stage, 0);
  // Without recomputation the first stage holds 16 micro-batches of all its blocks' activations
  // (Korthikanti et al. 2022: 10 sbh + 24 sbh / t + 5 a s^2 b / t a block): ten times more.
  r.layout = "tp8.pp16.dp8.m192";
  const double kept = plan::plan(r)[0].estimate.memory.activations;
  EXPECT_GT(kept, 10 * c.estimate.memory.activations);
  const double sbh = 2048.0 * 12288, block = 10 * sbh + 24 * sbh / 8 + 5 * 96 * 2048.0 * 2048 / 8;
  EXPECT_NEAR(kept, 16 * 6 * block, 1);
}

// In fp32 the planner's weights, gradients and optimizer state are the trainer's formula's, which
// validate holds the engine to byte for byte, for every layout validate runs.
TEST(Planner, Fp32MemoryIsTheTrainersFormula) {
  for (const std::string model : {"small", "tiny"}) {
    for (int experts : {0, 4}) {
      gpt::TrainOptions base;
      base.model = plan::model_preset(model).config;
      base.model.experts = experts;
      base.model.layers = 4;
      for (int ranks = 1; ranks <= 4; ++ranks) {
        for (const gpt::TrainOptions& o : gpt::validate_layouts("", base, ranks)) {
          for (int stage = 0; stage < o.pp; ++stage) {
            const gpt::Memory f = gpt::memory_formula(o, ranks, stage);
            const plan::Memory m = plan::memory_of(o, ranks, stage, Precision::fp32);
            const std::string name = gpt::layout_name(o, ranks);
            EXPECT_EQ(m.params, double(f.param_bytes)) << name;
            EXPECT_EQ(m.grads, double(f.grad_bytes)) << name;
            EXPECT_EQ(m.optimizer, double(f.optimizer_bytes)) << name;
          }
        }
      }
    }
  }
}

// The decision guide: fits one device: DP; too large for one device but fits a node: TP in the
// node or ZeRO; larger: TP in the node, PP or ZeRO across; MoE: EP.
TEST(Planner, TheDecisionGuide) {
  const plan::Candidate small = best(plan::plan(request("gpt2", "1x8", Precision::bf16_mixed, 64)));
  EXPECT_EQ(small.layout.tp * small.layout.pp * small.layout.cp, 1) << small.name;

  const auto node = plan::plan(request("7b", "1x8", Precision::bf16_mixed, 64));
  const plan::Candidate seven = best(node);
  EXPECT_GT(plan::model_state(6.6e9, Precision::bf16_mixed, 0, 1).total(), 80e9);
  EXPECT_TRUE(seven.layout.tp > 1 || seven.layout.stage > 0 || seven.layout.pp > 1) << seven.name;

  const auto many = plan::plan(request("175b", "64x8", Precision::bf16_mixed, 1536));
  const plan::Candidate big = best(many);
  EXPECT_LE(big.layout.tp, 8) << big.name;
  EXPECT_TRUE(big.layout.pp > 1 || big.layout.stage == 3) << big.name;
  for (const plan::Candidate& c : many) EXPECT_LE(c.layout.tp, 8) << c.name;

  // (8 Ki tokens per GPU; from about 32 Ki ZeRO-3's gathers of every expert hide behind the
  // computation and it overtakes ep: docs/planner.md.)
  const plan::Candidate moe = best(plan::plan(request("moe", "4x8", Precision::bf16_mixed, 64)));
  EXPECT_GT(moe.layout.ep, 1) << moe.name;
}

// A model that fits nowhere: every candidate refused, the smallest first, saying what it needs.
TEST(Planner, AModelThatFitsNowhereSaysByHowMuch) {
  const auto ranked = plan::plan(request("175b", "1x1", Precision::bf16_mixed, 8));
  ASSERT_FALSE(ranked.empty());
  for (const plan::Candidate& c : ranked) EXPECT_FALSE(c.refusal.empty()) << c.name;
  const std::string& why = ranked.front().refusal;
  EXPECT_NE(why.find("per device"), std::string::npos) << why;
  EXPECT_NE(why.find("has 80.0 GB"), std::string::npos) << why;
}

TEST(Planner, BadInputIsNamed) {
  auto error_of = [](auto f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of([] { plan::model_preset("8b"); }).find("unknown model '8b'"),
            std::string::npos);
  EXPECT_NE(error_of([] { plan::cluster_of("4y8", "h100", Precision::fp32); }).find("NxG"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              plan::cluster_of("4x8", "b200", Precision::fp32);
            }).find("unknown device 'b200'"),
            std::string::npos);
  plan::Request r = request("gpt2", "1x8", Precision::fp32, 0);
  EXPECT_NE(error_of([&] { plan::plan(r); }).find("--batch 0"), std::string::npos);
  r.batch = 12;
  r.layout = "tpx";
  EXPECT_NE(error_of([&] { plan::plan(r); }).find("tpx"), std::string::npos);
  r.layout = "tp5";  // runs nowhere on 8 devices: refused with the trainer's reason
  EXPECT_NE(plan::plan(r)[0].refusal.find("does not divide the 8 ranks"), std::string::npos);
  r.layout = "tp2.dp4.m5";  // 12 sequences over 4 readers do not make 5 micro-batches
  const auto refused = plan::plan(r);
  EXPECT_NE(refused[0].refusal.find("does not divide"), std::string::npos) << refused[0].refusal;
}

// The cost the planner reads for host collectives is the library's own choice and model.
TEST(EstimateCost, NamesTheChoiceAndRefusesUnknownCollectives) {
  strata::GroupShape one_node;
  one_node.ranks = 4;
  one_node.intra = {strata::PathClass::phb, 10, 0.5};
  const auto small = strata::estimate_cost("all_reduce", one_node, 1 << 20);
  EXPECT_EQ(small.algorithm, "shm");
  EXPECT_GT(small.seconds, 0);
  EXPECT_GT(strata::estimate_cost("all_reduce", one_node, 64 << 20).seconds, small.seconds);
  strata::GroupShape two = one_node;
  two.nodes = 2;
  two.inter = {strata::PathClass::net, 1.25, 30};
  EXPECT_EQ(strata::estimate_cost("all_reduce", two, 1 << 20).algorithm, "hierarchical");
  EXPECT_THROW(strata::estimate_cost("all_reduse", one_node, 8), strata::Error);
  two.nodes = 5;
  EXPECT_THROW(strata::estimate_cost("all_reduce", two, 8), strata::Error);
  // A link the group uses with Link's defaults (0 GB/s) would cost infinity: refused by name.
  auto refusal = [](const strata::GroupShape& g) {
    try {
      strata::estimate_cost("all_reduce", g, 1 << 20);
    } catch (const strata::Error& e) {
      EXPECT_EQ(e.code(), strata::ErrorCode::invalid_argument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  strata::GroupShape unset;
  unset.ranks = 4;
  EXPECT_NE(refusal(unset).find("intra-node link"), std::string::npos) << refusal(unset);
  two.nodes = 2;
  two.inter.bandwidth_gbs = 0;
  EXPECT_NE(refusal(two).find("inter-node link"), std::string::npos) << refusal(two);
  two.inter = {strata::PathClass::net, 1.25, -1};
  EXPECT_NE(refusal(two).find("latency of 0 or more"), std::string::npos) << refusal(two);
  two.ranks = 2, two.inter.latency_us = 30;  // one rank per node: its intra link goes unused
  const double across = strata::estimate_cost("all_reduce", two, 1 << 20).seconds;
  two.intra.bandwidth_gbs = 0;
  EXPECT_EQ(strata::estimate_cost("all_reduce", two, 1 << 20).seconds, across);
}

// The terms a calibration fits, each against its own arithmetic: small micro-batches run at
// r / (r + h) of the rate; ranks sharing cores take the longer of the node's computation over
// its cores and a rank's with its bubble; waits are per exchange, at most a share of the
// computation, none without exchanges; a split sequence adds its share of computation.
TEST(Planner, SmallMatricesSharedCoresWaitsAndSplitSequencesAreWhatTheModelSays) {
  plan::ClusterSpec c = plan::cluster_of("1x4", "h100", Precision::fp32);
  c.flops = 1e11, c.rows_half = 0, c.cores = 0, c.wait_us = 0, c.wait_share = 1;
  auto layout = [](const std::string& name, int micro_batches = 1) {
    gpt::TrainOptions base;
    base.model = plan::model_preset("small").config;
    base.global_batch = 32, base.micro_batches = micro_batches;
    return gpt::layout_from_name(name, base, 4);
  };
  const gpt::TrainOptions dp4 = layout("dp4"), dp4m8 = layout("dp4", 8);
  const double flops = plan::step_flops(dp4, Precision::fp32) / 4;
  EXPECT_DOUBLE_EQ(plan::estimate(dp4, c, Precision::fp32).time.compute, flops / 1e11);
  c.rows_half = 128;  // dp4: 8 sequences of 128 positions, 1024 rows; m8: 128 rows
  EXPECT_DOUBLE_EQ(plan::estimate(dp4, c, Precision::fp32).time.compute,
                   flops / (1e11 * 1024 / 1152));
  EXPECT_DOUBLE_EQ(plan::estimate(dp4m8, c, Precision::fp32).time.compute, flops / 1e11 * 2);
  c.rows_half = 0, c.cores = 2;  // four ranks on two cores
  EXPECT_DOUBLE_EQ(plan::estimate(dp4, c, Precision::fp32).time.compute, 2 * flops / 1e11);
  const plan::Time pp4 = plan::estimate(layout("pp4", 4), c, Precision::fp32).time;
  const double rank = flops / 1e11, bubble = rank * 3 / 4;  // (P - 1) / M of a stage's work
  EXPECT_NEAR(pp4.bubble, bubble, 1e-3 * bubble);           // its messages add a little
  EXPECT_NEAR(pp4.compute, 2 * rank - pp4.bubble, 1e-12);
  c.cores = 0, c.wait_us = 1000, c.wait_share = 0.5;
  EXPECT_EQ(plan::estimate(dp4, c, Precision::fp32).time.step(), flops / 1e11);  // no exchange
  const gpt::TrainOptions tp2 = layout("tp2.dp2"), tp2m32 = layout("tp2.dp2", 32);
  const plan::Time few = plan::estimate(tp2, c, Precision::fp32).time;
  const plan::Time many = plan::estimate(tp2m32, c, Precision::fp32).time;
  c.wait_us = 0;
  // tp2, one micro-batch: 6 blocks x 2 passes x 2 all-reduces, 1 ms each.
  EXPECT_NEAR(few.tp.exposed - plan::estimate(tp2, c, Precision::fp32).time.tp.exposed, 24e-3,
              1e-12);
  // 32 micro-batches: 768 exchanges, but no more than half the computation in all.
  EXPECT_NEAR(many.tp.exposed - plan::estimate(tp2m32, c, Precision::fp32).time.tp.exposed,
              0.5 * many.compute, 1e-12);
  c.cp_extra = 0.2;
  const gpt::TrainOptions cp2 = layout("cp2.dp2");
  EXPECT_DOUBLE_EQ(plan::estimate(cp2, c, Precision::fp32).time.compute, 1.2 * flops / 1e11);
  EXPECT_DOUBLE_EQ(plan::estimate(dp4, c, Precision::fp32).time.compute, flops / 1e11);
  // Hidden transfers across nodes cost core time on shared cores, and only there: two nodes of
  // two ranks on one core each; dp4 all-reduces across them, tp2.dp2's tp pairs sit in a node.
  plan::ClusterSpec two = plan::cluster_of("2x2", "h100", Precision::fp32);
  two.flops = 1e11, two.rows_half = 0, two.cores = 1, two.overlap_s_per_gb = 2;
  const plan::Estimate plain = plan::estimate(dp4, two, Precision::fp32);
  const double gb = plain.bytes.dp / 1e9;
  ASSERT_GT(gb, 0);
  EXPECT_DOUBLE_EQ(plain.time.compute, 2 * (flops / 1e11 + 2 * gb));
  two.cores = 0;  // a core each: the transfers take none from the computation
  EXPECT_DOUBLE_EQ(plan::estimate(dp4, two, Precision::fp32).time.compute, flops / 1e11);
  two = plan::cluster_of("1x4", "h100", Precision::fp32);
  two.flops = 1e11, two.rows_half = 0, two.cores = 2, two.overlap_s_per_gb = 2;  // one node
  EXPECT_DOUBLE_EQ(plan::estimate(dp4, two, Precision::fp32).time.compute, 2 * flops / 1e11);
}

// A pipeline's messages cross the network only at the boundaries whose stages sit on different
// nodes, and the fill and the drain wait for each boundary's in turn: on two nodes of four, pp2's
// one boundary crosses, pp4's middle one of three does; on one node of eight none does.
TEST(Planner, APipelineWaitsForTheNetworkOnlyWhereItsStagesCrossNodes) {
  plan::ClusterSpec two = plan::cluster_of("2x4", "h100", Precision::fp32);
  two.wait_us = 0;
  auto layout = [](const std::string& name) {
    gpt::TrainOptions base;
    base.model = plan::model_preset("small").config;
    base.global_batch = 32, base.micro_batches = 4;
    return gpt::layout_from_name(name, base, 8);
  };
  // A micro-batch's activation: its sequences on a data rank, 128 positions of 192, fp32.
  auto send = [](const strata::Link& l, double sequences) {
    return l.latency_us * 1e-6 + sequences * 128 * 192 * 4 / (l.bandwidth_gbs * 1e9);
  };
  const plan::Time pp4 = plan::estimate(layout("pp4.dp2"), two, Precision::fp32).time;
  EXPECT_NEAR(pp4.pp.exposed, 2 * (2 * send(two.intra, 4) + send(two.inter, 4)), 1e-15);
  EXPECT_NEAR(pp4.pp.comm, 2 * 4 * send(two.inter, 4), 1e-15);
  const plan::Time pp2 = plan::estimate(layout("pp2.dp4"), two, Precision::fp32).time;
  EXPECT_NEAR(pp2.pp.exposed, 2 * send(two.inter, 2), 1e-15);
  const plan::ClusterSpec one = plan::cluster_of("1x8", "h100", Precision::fp32);
  ASSERT_EQ(one.wait_us, 0);
  const plan::Time in_node = plan::estimate(layout("pp4.dp2"), one, Precision::fp32).time;
  EXPECT_NEAR(in_node.pp.exposed, 2 * 3 * send(one.intra, 4), 1e-15);
  EXPECT_NEAR(in_node.pp.comm, 2 * 4 * send(one.intra, 4), 1e-15);
}

// ZeRO-3 gathers each unit as often as the trainer's formula counts for the schedule: GPipe's
// four forwards in a row leave a backward the last forward's kept units once, 1F1B's
// alternation three times, so at the same sizes GPipe gathers more; ZeRO 1-2 gather once a step
// under either. On GPUs the planner's all-gather and reduce-scatter of one size cost alike
// (NCCL's ring: n - 1 steps of B/n), so a ZeRO-2 step's dp time is two such, a ZeRO-3 step's
// 1 + gathers, gathers being the formula's gathered bytes over one gather's at the stage the
// estimate times (GPipe's last, whose logits make it the fullest; 1F1B's first).
TEST(Planner, ZeroThreeGathersAsOftenAsTheScheduleDoes) {
  const plan::ClusterSpec c = plan::cluster_of("1x4", "h100", Precision::fp32);
  auto layout = [](const std::string& name) {
    gpt::TrainOptions base;
    base.model = plan::model_preset("small").config;
    base.global_batch = 32, base.micro_batches = 4;
    return gpt::layout_from_name(name, base, 4);
  };
  auto dp_time = [&](const std::string& name) {
    return plan::estimate(layout(name), c, Precision::fp32).time.dp.comm;
  };
  auto gathers = [&](const std::string& name) {
    const gpt::TrainOptions o = layout(name);
    const int stage = plan::estimate(o, c, Precision::fp32).stage;
    return gpt::traffic_formula(o, 4, stage).dp_gather_bus_bytes /
           strata::gather_bus_bytes(4.0 * double(gpt::memory_formula(o, 4, stage).params), 2);
  };
  const double gpipe = gathers("pp2.gpipe.dp2.zero3"), one_f = gathers("pp2.1f1b.dp2.zero3");
  EXPECT_GT(gpipe, one_f);
  EXPECT_GT(one_f, 1);
  for (const char* s : {"gpipe", "1f1b"}) {
    const std::string z2 = std::string("pp2.") + s + ".dp2.zero2";
    const std::string z3 = std::string("pp2.") + s + ".dp2.zero3";
    EXPECT_DOUBLE_EQ(gathers(z2), 1) << s;
    EXPECT_NEAR(dp_time(z3) / dp_time(z2), (1 + gathers(z3)) / 2, 1e-12) << s;
  }
}
