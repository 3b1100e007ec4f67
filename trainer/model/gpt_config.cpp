// The reference GPT's shapes (param_specs), its deterministic GPT-2 initialisation and the
// number of BLAS threads. The passes are in gpt_model.cpp and gpt_backward.cpp.
#include <cblas.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "model/gpt_model.hpp"
#include "model/model_internals.hpp"

namespace gpt {

// ---- configuration and parameters --------------------------------------------------------------

Config Config::named(const std::string& name) {
  Config c;
  if (name == "tiny") {
    c.vocab = 65, c.ctx = 16, c.layers = 2, c.heads = 2, c.embd = 32;
  } else if (name == "small") {
    c.vocab = 65, c.ctx = 128, c.layers = 6, c.heads = 6, c.embd = 192;
  } else {
    throw std::invalid_argument("gpt::Config::named: unknown configuration '" + name +
                                "' (known: tiny, small)");
  }
  return c;
}

size_t Config::num_params() const {
  size_t n = 0;
  for (const auto& s : param_specs(*this)) n += s.numel();
  return n;
}

namespace {

// splitmix64: a counter-based generator, so element i of tensor t needs no state.
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<strata::TensorSpec> param_specs(const Config& c) {
  check_config(c);
  const size_t V = c.vocab, T = c.ctx, C = c.embd;
  std::vector<strata::TensorSpec> s;
  s.push_back({"wte", {V, C}, 0});
  s.push_back({"wpe", {T, C}, 0});
  const size_t E = size_t(c.experts);
  for (int l = 0; l < c.layers; ++l) {
    auto add = [&](const char* tensor, std::vector<size_t> shape) {
      std::string name = "h";  // built piecewise: GCC 12 warns (-Wrestrict) on "h" + ... + "."
      name += std::to_string(l);
      name += '.';
      name += tensor;
      s.push_back({std::move(name), std::move(shape), 1 + l});
    };
    for (const auto& b : kBlock) {
      if (c.moe_block(l) && &b == &kBlock[FCW]) {  // the experts instead of the MLP
        add("router_w", {E, C});
        add("exp_fc_w", {E * 4 * C, C});
        add("exp_fc_b", {E * 4 * C});
        add("exp_fcproj_w", {E * C, 4 * C});
        add("exp_fcproj_b", {E * C});
        break;
      }
      std::vector<size_t> shape;
      if (b.rows_in_c) shape.push_back(b.rows_in_c * C);
      shape.push_back(b.cols_in_c * C);
      add(b.name, shape);
    }
  }
  s.push_back({"lnf_w", {C}, c.layers + 1});
  s.push_back({"lnf_b", {C}, c.layers + 1});
  return s;
}

bool is_expert_tensor(const std::string& name) {
  const size_t dot = name.find('.');
  return dot != std::string::npos && name.compare(dot + 1, 4, "exp_") == 0;
}

std::vector<strata::TensorSpec> expert_local_specs(std::vector<strata::TensorSpec> specs, int ep) {
  for (auto& s : specs)
    if (is_expert_tensor(s.name)) s.shape[0] /= size_t(ep);
  return specs;
}

std::vector<float> init_tensor(const Config& c, uint64_t seed, size_t t) {
  const auto specs = param_specs(c);
  if (t >= specs.size())
    throw std::out_of_range("gpt::init_tensor: tensor " + std::to_string(t) + " of " +
                            std::to_string(specs.size()));
  const std::string& name = specs[t].name;
  const auto ends_with = [&](const char* suffix) {
    const std::string s = suffix;
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  std::vector<float> v(specs[t].numel(), 0.0f);
  if (ends_with("ln1_w") || ends_with("ln2_w") || name == "lnf_w") {
    std::fill(v.begin(), v.end(), 1.0f);
    return v;
  }
  if (ends_with("_b")) return v;  // biases start at zero
  // Weights: N(0, std) by Box-Muller over two hashed uniforms per element.
  double std = 0.02;
  if (ends_with("proj_w")) std = 0.02 / std::sqrt(2.0 * c.layers);  // proj_w and fcproj_w
  const uint64_t key = splitmix64(splitmix64(seed) ^ (0xA24BAED4963EE407ull * (t + 1)));
  constexpr double two_pi = 6.283185307179586476925;
  for (size_t i = 0; i < v.size(); ++i) {
    const uint64_t h1 = splitmix64(key + 2 * i), h2 = splitmix64(key + 2 * i + 1);
    const double u1 = double((h1 >> 11) + 1) * 0x1.0p-53;  // (0, 1]: log is finite
    const double u2 = double(h2 >> 11) * 0x1.0p-53;        // [0, 1)
    v[i] = float(std * std::sqrt(-2.0 * std::log(u1)) * std::cos(two_pi * u2));
  }
  return v;
}

// ---- BLAS threads ------------------------------------------------------------------------------

namespace {
std::atomic<bool> g_blas_threads_set{false};
}

void set_blas_threads(int n) {
  if (n < 1) throw std::invalid_argument("gpt::set_blas_threads: need at least 1 thread");
  openblas_set_num_threads(n);
  g_blas_threads_set = true;
}

int blas_threads() { return openblas_get_num_threads(); }

// openblas_get_config(): "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64".
std::string blas_config() { return openblas_get_config(); }

void default_blas_threads() {
  if (g_blas_threads_set) return;
  int n = 1;
  if (const char* e = std::getenv("STRATA_GPT_BLAS_THREADS"); e && *e) {
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    if (*end != '\0' || v < 1 || v > 1024)
      throw std::invalid_argument(std::string("STRATA_GPT_BLAS_THREADS: not a thread count: ") + e);
    n = int(v);
  }
  set_blas_threads(n);
}

}  // namespace gpt
