// What the trainer's multi-rank tests share (parallel_test.cpp, ep_trainer_test.cpp): the tiny
// model on the bundled corpus, a layout with validate's micro-batch rule, a run's losses and
// parameters, the one-rank reference every rank computes alone, a directory every rank names.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "tests/mp/mp.hpp"
#include "tests/numerics.hpp"
#include "trainer/train/gpt_trainer.hpp"

namespace layout_runs {

using gpt::TrainOptions;
namespace pp = gpt::pp;

inline const gpt::CharCorpus& corpus() {
  static const gpt::CharCorpus c(STRATA_GPT_DATA);
  return c;
}

inline TrainOptions tiny(int layers = 4) {
  TrainOptions o;
  o.model = gpt::Config::named("tiny");
  o.model.layers = layers, o.model.heads = 4;
  o.model.vocab = corpus().vocab();
  o.global_batch = 24, o.micro_batches = 1, o.warmup = 2, o.steps = 10;
  return o;
}

// Each layout gets micro-batches of one size (validate's rule): m = M * tp * pp (validate also
// multiplies by cp; the tests compare cp layouts within rounding bounds, which do not need it).
inline TrainOptions layout(TrainOptions o, int tp, int pp,
                           pp::Schedule s = pp::Schedule::one_f_one_b, int v = 1) {
  o.tp = tp, o.pp = pp, o.schedule = s, o.virtual_stages = v;
  o.micro_batches *= tp * pp;
  return o;
}

struct Trained {
  std::vector<float> losses, params;
};

inline Trained train(strata::Communicator comm, const TrainOptions& o, int steps) {
  gpt::Trainer t(comm, corpus(), o);
  Trained r;
  for (int s = 0; s < steps; ++s) r.losses.push_back(t.step().loss);
  r.params = t.parameters();
  return r;
}

// The one-rank reference with the same micro-batches: every rank computes it alone.
inline Trained reference(const TrainOptions& base, int steps) {
  auto& w = mp::world();
  TrainOptions o = base;
  o.micro_batches *= w.size();
  return train(w.split(w.rank(), 0), o, steps);
}

inline double tokens(const TrainOptions& o) { return double(o.global_batch) * o.model.ctx; }

inline size_t wte_numel(const TrainOptions& o) {
  return size_t(o.model.vocab) * size_t(o.model.embd);
}

using numerics::bits_equal;
using numerics::rel_l2;
using numerics::reorder_bound;

// Prints a measured difference beside its bound (rank 0), so a run shows the margin.
inline void measured(const std::string& what, double got, double bound) {
  if (mp::world().rank() == 0)
    std::printf("[ measured ] %s: %.2e (bound %.2e)\n", what.c_str(), got, bound);
}

// The gradient norm clipping saw in each of `steps` steps of layout o on comm.
inline std::vector<float> grad_norms(strata::Communicator comm, const TrainOptions& o, int steps) {
  gpt::Trainer t(comm, corpus(), o);
  std::vector<float> n;
  for (int s = 0; s < steps; ++s) n.push_back(float(t.step().grad_norm));
  return n;
}

// n normal samples of standard deviation sd from `seed`: test inputs every rank draws alike.
inline std::vector<float> randn(size_t n, double sd, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0, float(sd));
  std::vector<float> v(n);
  for (float& x : v) x = g(rng);
  return v;
}

// A directory every rank names the same: rank 0's pid, broadcast.
inline std::string shared_dir(const std::string& what) {
  auto& w = mp::world();
  std::vector<int64_t> pid{int64_t(::getpid())};
  w.broadcast(strata::buffer(pid), 0).wait();
  return (std::filesystem::temp_directory_path() /
          ("strata-gpt-" + what + "-" + std::to_string(pid[0])))
      .string();
}

}  // namespace layout_runs
