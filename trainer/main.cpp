// strata-gpt: the reference GPT trainer. `strata-gpt --help` lists the options; docs/trainer.md
// explains the model, the layouts and validate mode.
#include <chrono>
#include <cstdio>
#include <exception>

#include "model/gpt_model.hpp"
#include "modes.hpp"
#include "strata/error.hpp"
#include "validate/layouts.hpp"

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
    const gpt::CharCorpus data(r.data);
    r.train.model.vocab = data.vocab();
    // A layout the world cannot hold is bad input like a bad flag: one line, exit 2, nothing run.
    if (r.mode == "validate")
      gpt::validate_layouts(r.layouts, r.train, world.size());
    else
      gpt::check_layout(r.train, gpt::training_ranks(r.train, world.size()));
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
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-gpt: %s\n", e.what());
    return 1;
  }
}
