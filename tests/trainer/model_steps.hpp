// What the model tests share (gpt_gradcheck_test.cpp, gpt_model_test.cpp): parameters made and
// split by unit, one full forward and backward step through gpt::Model, random tokens.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/numerics.hpp"
#include "trainer/model/gpt_model.hpp"
#include "trainer/train/char_data.hpp"

namespace model_steps {

using gpt::Config;
using Tensors = std::vector<std::vector<float>>;

inline const std::string kCorpus = std::string(STRATA_DATA_DIR) + "/tinyshakespeare.txt";

// ---- helpers: parameters by unit, one full step ------------------------------------------------

inline Tensors init_all(const Config& c, uint64_t seed) {
  Tensors t;
  for (size_t i = 0; i < gpt::param_specs(c).size(); ++i) t.push_back(gpt::init_tensor(c, seed, i));
  return t;
}

inline Tensors zeros_like(const Tensors& p, float fill = 0.0f) {
  Tensors g;
  for (const auto& t : p) g.emplace_back(t.size(), fill);
  return g;
}

// At initialisation LayerNorm weights are 1 and biases 0, which would hide a kernel that ignores
// them. The gradient check moves every parameter off those values.
inline void perturb(const Config& c, Tensors& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  const auto specs = gpt::param_specs(c);
  for (size_t t = 0; t < p.size(); ++t) {
    const std::string& name = specs[t].name;
    const bool ln_w = name.find("ln") != std::string::npos && name.back() == 'w';
    const bool bias = name.size() > 2 && name.substr(name.size() - 2) == "_b";
    for (float& v : p[t]) {
      if (ln_w)
        v += 0.1f * n(rng);
      else if (bias)
        v += 0.02f * n(rng);
    }
  }
}

template <class T, class Vec>
inline std::vector<std::span<T>> unit_spans(const Config& c, Vec& tensors, int unit) {
  std::vector<std::span<T>> out;
  const auto specs = gpt::param_specs(c);
  for (size_t t = 0; t < specs.size(); ++t)
    if (specs[t].unit == unit) out.emplace_back(tensors[t].data(), tensors[t].size());
  return out;
}
inline gpt::Params params(const Config& c, const Tensors& p, int u) {
  return unit_spans<const float>(c, p, u);
}
inline gpt::Grads grads(const Config& c, Tensors& g, int u) { return unit_spans<float>(c, g, u); }

inline float forward(gpt::Model& m, const Tensors& p, const std::vector<int>& tok,
                     const std::vector<int>& tgt) {
  const Config& c = m.config();
  m.embed(tok, params(c, p, 0));
  for (int l = 0; l < c.layers; ++l) m.block(l, params(c, p, 1 + l));
  return m.head(tgt, params(c, p, c.layers + 1), p[0]);
}

inline void backward(gpt::Model& m, const Tensors& p, Tensors& g, float scale, bool accumulate) {
  const Config& c = m.config();
  m.head_backward(params(c, p, c.layers + 1), p[0], grads(c, g, c.layers + 1), g[0], scale,
                  accumulate);
  for (int l = c.layers - 1; l >= 0; --l)
    m.block_backward(l, params(c, p, 1 + l), grads(c, g, 1 + l), accumulate);
  m.embed_backward(grads(c, g, 0), accumulate);
}

inline std::vector<int> random_tokens(size_t n, int V, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int> t(n);
  for (int& x : t) x = int(rng() % uint64_t(V));
  return t;
}

}  // namespace model_steps
