// strata-gpt: the reference GPT trainer. `strata-gpt --help` lists the options; docs/trainer.md
// explains the model, the layouts and validate mode.
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/gpt_model.hpp"
#include "modes.hpp"
#include "strata/error.hpp"
#include "validate/layouts.hpp"

namespace {

// The corpus, or bad input naming --data (a missing file, a directory, too short).
gpt::CharCorpus read_data(const std::string& path) {
  try {
    return gpt::CharCorpus(path);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(std::string("--data: ") + e.what());
  }
}

// The files rank 0 writes at the end, tried before anything runs: a typo in a path must not
// cost the run. Every rank learns rank 0's verdict (bad input: exit 2).
void check_outputs(strata::Communicator& world, const gpt::RunOptions& r) {
  std::string why;
  if (world.rank() == 0) {
    for (const auto& [flag, path] :
         {std::pair<const char*, std::string>{"--json", r.json}, {"--plot", r.plot}}) {
      if (!path.empty() && !std::ofstream(path, std::ios::app))
        why = std::string(flag) + " " + path + ": cannot write it";
    }
    for (const auto& [flag, dir] :
         {std::pair<const char*, std::string>{"--save", r.save}, {"--report", r.report}}) {
      std::error_code ec;
      if (!dir.empty() && !std::filesystem::create_directories(dir, ec) && ec)
        why = std::string(flag) + " " + dir + ": cannot make the directory (" + ec.message() + ")";
    }
  }
  std::vector<int32_t> bad = {why.empty() ? 0 : 1};
  world.all_reduce(strata::buffer(bad), strata::ReduceOp::max).wait();
  if (bad[0]) throw std::invalid_argument(why.empty() ? "rank 0 cannot write its outputs" : why);
}

}  // namespace

int main(int argc, char** argv) {
  gpt::use_best_blas_kernel(argv);
  gpt::RunOptions r;
  try {
    bool help = false;
    r = gpt::parse_command_line(argc, argv, help);
    if (help) {
      std::fputs(gpt::usage().c_str(), stdout);
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-gpt: %s\n%s", e.what(), gpt::usage().c_str());
    return 2;
  }
  strata::Communicator world;
  try {
    world = gpt::job_communicator();
    const gpt::CharCorpus data = read_data(r.data);
    r.train.model.vocab = data.vocab();
    // A layout the world cannot hold is bad input like a bad flag: one line, exit 2, nothing run.
    if (r.mode == "validate")
      gpt::validate_layouts(r.layouts, r.train, world.size());
    else
      gpt::check_layout(r.train, gpt::training_ranks(r.train, world.size()));
    check_outputs(world, r);
    return r.mode == "validate" ? gpt::run_validate(world, data, r)
                                : gpt::run_train(world, data, r);
  } catch (const std::invalid_argument& e) {  // the same on every rank: one says it
    if (!world || world.rank() == 0) std::fprintf(stderr, "strata-gpt: %s\n", e.what());
    // The others wait for it to have said it: a launcher stops every rank once one exits.
    try {
      if (world) world.barrier().wait(std::chrono::seconds(5));
    } catch (const std::exception&) {
    }
    return 2;
  } catch (const std::bad_alloc&) {
    const gpt::Config& c = r.train.model;
    std::fprintf(stderr,
                 "strata-gpt: out of memory for the model and its activations (--layers %d "
                 "--embd %d --ctx %d --batch %d --experts %d)\n",
                 c.layers, c.embd, c.ctx, r.train.global_batch, c.experts);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-gpt: %s\n", e.what());
    return 1;
  }
}
