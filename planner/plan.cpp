#include "plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "validate/layouts.hpp"

namespace plan {
namespace {

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i) {
    if (n % i == 0) d.push_back(i);
  }
  return d;
}

std::string gigabytes(double bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f GB", bytes / 1e9);
  return s;
}

// The trainer's own checks, and the two a cluster adds: tp inside a node, and the memory.
void judge(Candidate& c, const Request& r) {
  const int ranks = r.cluster.devices();
  try {
    gpt::check_layout(c.layout, ranks);
  } catch (const std::invalid_argument& e) {
    c.refusal = e.what();
    return;
  }
  if (c.layout.tp > r.cluster.per_node) {
    c.refusal = "tp=" + std::to_string(c.layout.tp) + " spans nodes (" +
                std::to_string(r.cluster.per_node) + " devices per node)";
    return;
  }
  c.estimate = estimate(c.layout, r.cluster, r.precision);
  const Memory& m = c.estimate.memory;
  if (m.total() > r.cluster.memory_bytes) {
    c.refusal = "needs " + gigabytes(m.total()) + " per device on stage " +
                std::to_string(c.estimate.stage) + ", has " + gigabytes(r.cluster.memory_bytes) +
                " (parameters " + gigabytes(m.params) + ", gradients " + gigabytes(m.grads) +
                ", optimizer " + gigabytes(m.optimizer) + ", activations " +
                gigabytes(m.activations) + ", buffers " + gigabytes(m.buffers) + ")";
  }
}

gpt::TrainOptions base_options(const Request& r) {
  gpt::TrainOptions o;
  o.model = r.model.config;
  o.global_batch = r.batch;
  // Buckets as PyTorch DDP's default (25 MB) on models past the trainer's own.
  o.bucket_bytes = r.model.config.num_params() > 100000000 ? 25u << 20 : o.bucket_bytes;
  return o;
}

// Every layout of the request's cluster: the mesh's axes in Megatron's order, each size that
// divides what is left, then the choices that do not change the mesh.
std::vector<gpt::TrainOptions> every_layout(const Request& r) {
  const int ranks = r.cluster.devices();
  const gpt::Config& c = r.model.config;
  const gpt::TrainOptions base = base_options(r);
  std::vector<gpt::TrainOptions> out;
  for (int tp : divisors(std::min(ranks, r.cluster.per_node))) {
    if (c.heads % tp != 0) continue;
    for (int cp : divisors(ranks / tp)) {
      if (cp > 1 && c.ctx % (2 * cp) != 0) continue;
      for (int ep : divisors(ranks / tp / cp)) {
        if (ep > 1 && (c.experts == 0 || c.experts % ep != 0)) continue;
        for (int pp : divisors(ranks / tp / cp / ep)) {
          if (pp > c.layers) continue;
          gpt::TrainOptions o = base;
          o.tp = tp, o.cp = cp, o.ep = ep, o.pp = pp;
          const int readers = gpt::data_ranks(o, ranks);
          if (r.batch % readers != 0) continue;
          for (int m : divisors(r.batch / readers)) {
            if (pp > 1 && m < pp) continue;
            o.micro_batches = m;
            for (int zero = 0; zero <= 3; ++zero) {
              for (bool recompute : {false, true}) {
                for (bool sp : {false, true}) {
                  if (sp && tp == 1) continue;
                  o.stage = zero, o.recompute = recompute, o.sp = sp;
                  o.schedule = gpt::pp::Schedule::one_f_one_b, o.virtual_stages = 1;
                  out.push_back(o);
                  if (pp > 1 && m % pp == 0 && c.layers % (2 * pp) == 0) {
                    o.schedule = gpt::pp::Schedule::interleaved, o.virtual_stages = 2;
                    out.push_back(o);
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace

std::string full_name(const gpt::TrainOptions& o, int ranks) {
  std::string n = gpt::layout_name(o, ranks);
  if (o.pp > 1 || o.micro_batches > 1) n += ".m" + std::to_string(o.micro_batches);
  if (o.recompute) n += ".recompute";
  return n;
}

std::vector<Candidate> plan(const Request& r) {
  if (r.batch < 1) {
    throw std::invalid_argument("--batch " + std::to_string(r.batch) +
                                ": the global batch must be 1 sequence or more");
  }
  const int ranks = r.cluster.devices();
  std::vector<Candidate> out;
  if (!r.layout.empty()) {
    // validate's spelling, and "mN": N micro-batches.
    gpt::TrainOptions base = base_options(r);
    std::string rest;
    size_t at = 0;
    while (at <= r.layout.size()) {
      const size_t dot = std::min(r.layout.find('.', at), r.layout.size());
      const std::string token = r.layout.substr(at, dot - at);
      if (token.size() > 1 && token[0] == 'm' &&
          token.find_first_not_of("0123456789", 1) == std::string::npos) {
        base.micro_batches = std::stoi(token.substr(1));
      } else {
        rest += (rest.empty() ? "" : ".") + token;
      }
      at = dot + 1;
    }
    Candidate c;
    c.layout = gpt::layout_from_name(rest, base, ranks);  // throws naming the token
    c.name = full_name(c.layout, ranks);
    judge(c, r);
    out.push_back(std::move(c));
    return out;
  }
  for (const gpt::TrainOptions& o : every_layout(r)) {
    Candidate c{o, full_name(o, ranks), {}, {}};
    judge(c, r);
    if (c.estimate.memory.total() > 0) out.push_back(std::move(c));  // the trainer refuses the rest
  }
  std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    const bool fa = a.refusal.empty(), fb = b.refusal.empty();
    if (fa != fb) return fa;
    // Equal times (to a part in a million): the one that needs less memory.
    const double ta = a.estimate.time.step(), tb = b.estimate.time.step();
    if (fa && std::abs(ta - tb) > 1e-6 * std::max(ta, tb)) return ta < tb;
    return a.estimate.memory.total() < b.estimate.memory.total();
  });
  return out;
}

}  // namespace plan
