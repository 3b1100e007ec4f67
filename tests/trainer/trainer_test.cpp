// The trainer on one rank: learning-rate schedule, command line, gradient accumulation, resume
// from a checkpoint and learning on the bundled corpus. The multi-rank equivalence of every
// layout is `strata-gpt validate`, run by CTest under mpirun (tests/trainer/CMakeLists.txt).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "cli.hpp"
#include "tests/numerics.hpp"
#include "train/gpt_trainer.hpp"

namespace {

const gpt::CharCorpus& corpus() {
  static const gpt::CharCorpus c(STRATA_GPT_DATA);
  return c;
}

strata::Communicator& one_rank() {
  static strata::Communicator c = gpt::job_communicator();
  return c;
}

gpt::TrainOptions tiny(int steps) {
  gpt::TrainOptions o;
  o.model = gpt::Config::named("tiny");
  o.steps = steps;
  o.global_batch = 8;
  o.warmup = 2;
  return o;
}

std::vector<float> losses(gpt::Trainer& t, int steps) {
  std::vector<float> out;
  for (int s = 0; s < steps; ++s) out.push_back(t.step().loss);
  return out;
}

TEST(Schedule, WarmsUpLinearlyThenDecaysAlongACosineToTheFloor) {
  gpt::TrainOptions o;
  o.lr = 1e-2f, o.min_lr = 1e-3f, o.warmup = 4, o.steps = 14;
  EXPECT_FLOAT_EQ(gpt::learning_rate(o, 0), 2.5e-3f);
  EXPECT_FLOAT_EQ(gpt::learning_rate(o, 3), 1e-2f);
  EXPECT_FLOAT_EQ(gpt::learning_rate(o, 4), 1e-2f);    // cosine starts at the peak
  EXPECT_FLOAT_EQ(gpt::learning_rate(o, 9), 5.5e-3f);  // halfway: (peak + floor) / 2
  EXPECT_FLOAT_EQ(gpt::learning_rate(o, 14), 1e-3f);   // the floor, and it stays there
  EXPECT_FLOAT_EQ(gpt::learning_rate(o, 20), 1e-3f);
}

TEST(CommandLine, ParsesFlagsAndNamesTheBadOne) {
  const char* ok[] = {"strata-gpt", "validate", "--layers", "3",
                      "--config",   "tiny",     "--stage",  "2"};
  bool help = false;
  gpt::RunOptions r = gpt::parse_command_line(8, const_cast<char**>(ok), help);
  EXPECT_EQ(r.mode, "validate");
  EXPECT_EQ(r.train.model.layers, 3);  // a dimension flag overrides the named config anywhere
  EXPECT_EQ(r.train.model.embd, gpt::Config::named("tiny").embd);
  EXPECT_EQ(r.train.stage, 2);
  auto error = [&](std::vector<const char*> argv) {
    try {
      gpt::parse_command_line(int(argv.size()), const_cast<char**>(argv.data()), help);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error({"strata-gpt", "--stage", "5"}).find("--stage"), std::string::npos);
  EXPECT_NE(error({"strata-gpt", "--steps", "ten"}).find("--steps"), std::string::npos);
  EXPECT_NE(error({"strata-gpt", "--bogus", "1"}).find("--bogus"), std::string::npos);
  EXPECT_NE(error({"strata-gpt", "--embd", "30", "--heads", "4"}).find("--heads"),
            std::string::npos);
  EXPECT_NE(error({"strata-gpt", "--config", "huge"}).find("huge"), std::string::npos);
  EXPECT_NE(error({"strata-gpt", "--lr"}).find("needs a value"), std::string::npos);
  for (const char* bad : {"inf", "nan", "-inf", "1e999"}) {
    EXPECT_NE(error({"strata-gpt", "--lr", bad}).find("--lr: not a finite number"),
              std::string::npos)
        << bad;
    EXPECT_NE(error({"strata-gpt", "--aux-loss-coef", bad}).find("--aux-loss-coef: not a finite"),
              std::string::npos)
        << bad;
  }
  EXPECT_NE(error({"strata-gpt", "--steps", "99999999999"}).find("--steps: must be from 1 to"),
            std::string::npos);
  EXPECT_NE(error({"strata-gpt", "--optimizer", "lion"}).find("--optimizer"), std::string::npos);
  EXPECT_NE(error({"strata-gpt", "--optimizer", "sgd", "--offload-optimizer", "disk:/tmp"})
                .find("SGD keeps no optimizer state"),
            std::string::npos);
  EXPECT_NE(error({"strata-gpt", "--islands", "2", "--join", "h:1", "--save", "d"})
                .find("--save and --resume with --join"),
            std::string::npos);
  EXPECT_NE(error({"strata-gpt", "validate", "--islands", "2"}).find("--islands"),
            std::string::npos);
  // One step would hold the set-up step to a steady step's traffic (ZeRO 1-3 fail it).
  EXPECT_NE(error({"strata-gpt", "validate", "--steps", "1"}).find("validate needs --steps 2"),
            std::string::npos);
  EXPECT_EQ(error({"strata-gpt", "--steps", "1"}), "no error");  // train: one step is a run
  // --islands alone takes DiLoCo's published H.
  const char* islands[] = {"strata-gpt", "--islands", "2", "--optimizer", "sgd"};
  r = gpt::parse_command_line(5, const_cast<char**>(islands), help);
  EXPECT_EQ(r.train.islands, 2);
  EXPECT_EQ(r.train.outer_every, 50);
  EXPECT_EQ(r.train.rule, strata::UpdateRule::sgd);
  for (const char* bad : {"localhost", "localhost:http", "h:0", "h:70000", ":29500"}) {
    EXPECT_NE(
        error({"strata-gpt", "--islands", "2", "--join", bad}).find("--join: expected HOST:PORT"),
        std::string::npos)
        << bad;
  }
  EXPECT_NE(error({"strata-gpt", "--join", "h:29500"}).find("--islands K"), std::string::npos);
  EXPECT_NE(error({"strata-gpt", "--offload-optimizer", "/tmp"}).find("disk:DIR"),
            std::string::npos);
  EXPECT_NE(error({"strata-gpt", "--offload-window", "0"}).find("--offload-window"),
            std::string::npos);
  const char* offload[] = {"strata-gpt", "--offload-optimizer", "disk:/x y", "--offload-window",
                           "3"};
  r = gpt::parse_command_line(5, const_cast<char**>(offload), help);
  EXPECT_EQ(r.train.offload.optimizer_dir, "/x y");
  EXPECT_EQ(r.train.offload.window_bytes, size_t(3) << 20);
  EXPECT_NE(error({"strata-gpt", "--offload-params", "--stage", "3"}).find("--offload-params"),
            std::string::npos);
  EXPECT_NE(
      error({"strata-gpt", "--offload-params", "--stage", "2", "--offload-optimizer", "disk:/tmp"})
          .find("--stage 3"),
      std::string::npos);
  // Finite as a double but not as a float: --aux-loss-coef 1e39 trained to inf, then NaN.
  EXPECT_EQ(error({"strata-gpt", "--experts", "2", "--aux-loss-coef", "1e39"}),
            "--aux-loss-coef: 1e39 is beyond a float's range");
  EXPECT_EQ(error({"strata-gpt", "--lr", "-1e39"}), "--lr: -1e39 is beyond a float's range");
  // The cosine decays from --lr to --min-lr: above it, the "decay" climbed.
  EXPECT_EQ(error({"strata-gpt", "--lr", "0.001", "--min-lr", "1"}),
            "--min-lr 1.000000 exceeds --lr 0.001000 (the cosine decays from one to the other)");
  EXPECT_EQ(error({"strata-gpt", "validate", "--tolerance", "-1"}), "--tolerance must be > 0");
  EXPECT_EQ(error({"strata-gpt", "validate", "--bw-threshold", "-5"}),
            "--bw-threshold must be >= 0");
  // Options the mode or the rest of the line would leave without effect.
  EXPECT_EQ(error({"strata-gpt", "validate", "--json", "v.json"}), "--json applies to train only");
  EXPECT_EQ(error({"strata-gpt", "validate", "--resume", "ck"}), "--resume applies to train only");
  EXPECT_EQ(error({"strata-gpt", "train", "--layouts", "tp2"}),
            "--layouts applies to validate only");
  EXPECT_EQ(error({"strata-gpt", "train", "--report", "rep"}), "--report applies to validate only");
  EXPECT_EQ(error({"strata-gpt", "--outer-dtype", "int8"}), "--outer-dtype needs --islands K");
  EXPECT_EQ(error({"strata-gpt", "--top-k", "1"}), "--top-k needs --experts E");
  EXPECT_EQ(error({"strata-gpt", "--experts", "4", "--top-k", "1"}), "no error");
}

// With no --config the model is the named `small` (the main job's), and the warm-up is a tenth of
// the steps, at least 20 or half a shorter run, unless --warmup says otherwise: a 20-step run
// must not end while still warming up, nor reach the peak rate after 2 steps. validate warms up
// over all its steps, and no fewer than 20.
TEST(CommandLine, DefaultsAreTheSmallModelAndAWarmUpScaledToTheRun) {
  bool help = false;
  auto parse = [&](std::vector<const char*> argv) {
    return gpt::parse_command_line(int(argv.size()), const_cast<char**>(argv.data()), help);
  };
  const gpt::Config small = gpt::Config::named("small");
  const gpt::RunOptions plain = parse({"strata-gpt"});
  EXPECT_EQ(plain.train.model.layers, small.layers);
  EXPECT_EQ(plain.train.model.heads, small.heads);
  EXPECT_EQ(plain.train.model.embd, small.embd);
  EXPECT_EQ(plain.train.model.ctx, small.ctx);
  EXPECT_EQ(plain.train.steps, 200);
  EXPECT_EQ(plain.train.warmup, 20);
  EXPECT_EQ(parse({"strata-gpt", "validate"}).train.warmup, 20);  // its 20 steps
  EXPECT_EQ(parse({"strata-gpt", "validate", "--steps", "10"}).train.warmup, 20);
  EXPECT_EQ(parse({"strata-gpt", "validate", "--steps", "40"}).train.warmup, 40);
  EXPECT_EQ(parse({"strata-gpt", "--steps", "1000"}).train.warmup, 100);
  EXPECT_EQ(parse({"strata-gpt", "--steps", "20"}).train.warmup, 10);
  EXPECT_EQ(parse({"strata-gpt", "--steps", "5"}).train.warmup, 2);
  EXPECT_EQ(parse({"strata-gpt", "--steps", "1"}).train.warmup, 1);
  EXPECT_EQ(parse({"strata-gpt", "--steps", "20", "--warmup", "15"}).train.warmup, 15);
  EXPECT_EQ(parse({"strata-gpt", "--warmup", "0", "--steps", "50"}).train.warmup, 0);
  EXPECT_EQ(parse({"strata-gpt", "--config", "tiny"}).train.model.ctx,
            gpt::Config::named("tiny").ctx);
  parse({"strata-gpt", "--help"});
  EXPECT_TRUE(help);
  EXPECT_NE(gpt::usage().find("(default 1337)"), std::string::npos);
}

TEST(Trainer, BatchThatDoesNotDivideIsAnError) {
  auto o = tiny(1);
  o.global_batch = 6;
  o.micro_batches = 4;
  EXPECT_THROW(gpt::Trainer(one_rank(), corpus(), o), std::invalid_argument);
}

TEST(Trainer, MicroBatchAccumulationMatchesOneBatch) {
  auto o = tiny(5);
  gpt::Trainer whole(one_rank(), corpus(), o);
  o.micro_batches = 4;
  gpt::Trainer micro(one_rank(), corpus(), o);
  const auto a = losses(whole, 5), b = losses(micro, 5);
  // Four micro-batches split the weight gradients' sums over the step's tokens into four partial
  // sums: the same terms in another order, over 5 steps (tests/numerics.hpp).
  const double tokens = double(o.global_batch) * o.model.ctx;
  const double bound = numerics::reorder_bound(tokens, 5);
  EXPECT_LE(numerics::rel_l2(b, a), numerics::mean_bound(bound, tokens)) << "losses";
  const numerics::Worst worst =
      numerics::worst_tensor(micro.parameters(), whole.parameters(), gpt::param_specs(o.model));
  EXPECT_LE(worst.rel, bound) << "parameters differ most in " << worst.tensor;
  std::printf("[ measured ] worst tensor %s: %.2e (bound %.2e)\n", worst.tensor.c_str(), worst.rel,
              bound);
}

TEST(Trainer, ResumedRunContinuesWithTheSameLosses) {
  const std::string dir = testing::TempDir() + "/strata_gpt_resume";
  std::filesystem::remove_all(dir);
  for (int stage : {0, 3}) {
    auto o = tiny(6);
    o.stage = stage;
    gpt::Trainer straight(one_rank(), corpus(), o);
    const auto first = losses(straight, 3);
    straight.save(dir);
    const auto rest = losses(straight, 3);
    gpt::Trainer resumed(one_rank(), corpus(), o);
    resumed.load(dir);
    EXPECT_EQ(resumed.steps_done(), 3);
    const auto again = losses(resumed, 3);
    for (int s = 0; s < 3; ++s)
      EXPECT_EQ(again[s], rest[s]) << "stage " << stage << " step " << 3 + s;
    EXPECT_EQ(resumed.parameters(), straight.parameters()) << "stage " << stage;
  }
  std::filesystem::remove_all(dir);
}

// A mixture of experts resumes bit for bit too (the checkpoint holds its shape), and refuses a
// checkpoint of the dense model.
TEST(Trainer, ResumedMixtureOfExpertsContinuesWithTheSameLosses) {
  const std::string dir = testing::TempDir() + "/strata_gpt_resume_moe";
  std::filesystem::remove_all(dir);
  auto o = tiny(6);
  o.model.experts = 4, o.model.top_k = 2, o.model.capacity_factor = 1.25;
  gpt::Trainer straight(one_rank(), corpus(), o);
  losses(straight, 3);
  straight.save(dir);
  const auto rest = losses(straight, 3);
  gpt::Trainer resumed(one_rank(), corpus(), o);
  resumed.load(dir);
  EXPECT_EQ(losses(resumed, 3), rest);
  EXPECT_EQ(resumed.parameters(), straight.parameters());
  auto dense = tiny(6);
  gpt::Trainer other(one_rank(), corpus(), dense);
  try {
    other.load(dir);
    ADD_FAILURE() << "a dense model loaded a mixture of experts' checkpoint";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("holds another model"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

// Top-2 of 4 experts in every block learns as the dense model does (the same optimizer and data),
// and its loss includes the load-balancing term: about coef (E sum f P is 1 when balanced).
TEST(Trainer, MixtureOfExpertsLearnsTheCorpus) {
  auto o = tiny(150);
  o.global_batch = 32;
  o.warmup = 10;
  o.lr = 1e-2f, o.min_lr = 1e-3f;
  o.model.experts = 4, o.model.top_k = 2;
  gpt::Trainer t(one_rank(), corpus(), o);
  const float before = t.evaluate(4);
  EXPECT_NEAR(before, std::log(65.0f) + o.model.aux_loss_coef * o.model.layers, 0.15f);
  losses(t, 150);
  const float after = t.evaluate(4);
  EXPECT_LT(after, 2.9f) << "validation loss " << before << " -> " << after;
}

// The step's routing instruments add up: every block's experts took, with what was dropped, the
// batch's B T k assignments; the capacity bounds each expert.
TEST(Trainer, MixtureOfExpertsReportsItsRouting) {
  auto o = tiny(2);
  o.model.experts = 4, o.model.top_k = 2, o.model.capacity_factor = 1;
  gpt::Trainer t(one_rank(), corpus(), o);
  const gpt::StepReport r = t.step();
  ASSERT_EQ(r.experts.size(), size_t(o.model.layers));
  const double assignments = double(o.global_batch) * o.model.ctx * o.model.top_k;
  const double cap = double(o.global_batch) * std::ceil(1.0 * o.model.ctx * 2 / 4);
  for (const auto& x : r.experts) {
    EXPECT_DOUBLE_EQ(x.mean * o.model.experts + x.dropped, assignments) << "block " << x.layer;
    EXPECT_LE(x.max, cap) << "block " << x.layer;
    EXPECT_LE(x.min, x.mean);
    EXPECT_LE(x.mean, x.max);
  }
  EXPECT_GT(r.experts[0].dropped + r.experts[1].dropped, 0) << "capacity 1 drops at start";
}

TEST(Trainer, LearnsTheCorpus) {
  auto o = tiny(200);
  o.global_batch = 32;
  o.warmup = 10;
  o.lr = 1e-2f, o.min_lr = 1e-3f;
  gpt::Trainer t(one_rank(), corpus(), o);
  const float before = t.evaluate(4);
  EXPECT_NEAR(before, std::log(65.0f), 0.15f);  // uniform guessing at initialisation
  losses(t, 200);
  const float after = t.evaluate(4);
  // Below the corpus's single-character entropy (3.31 nats) by a margin: the model uses context.
  EXPECT_LT(after, 2.9f) << "validation loss " << before << " -> " << after;
  // A sample is text from the corpus's alphabet, as long as asked.
  const std::string s = t.sample("ROMEO:\n", 40, 0.8f, 7);
  EXPECT_EQ(s.size(), 40u);
  EXPECT_NO_THROW(corpus().encode(s));
}

}  // namespace
