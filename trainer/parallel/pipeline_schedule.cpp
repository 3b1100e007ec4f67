// Pipeline-parallel schedules. All three are one pattern with a different warm-up: W forwards,
// then alternately one forward and one backward, then the W backwards left (GPipe: W = every
// forward; 1F1B: W = the stages after this one). Interleaving also maps the k-th pass to a chunk.
#include "parallel/pipeline_schedule.hpp"

#include <algorithm>
#include <stdexcept>

namespace gpt::pp {

namespace {

using std::to_string;

// Forwards this rank runs before its first backward. Megatron's interleaved count: every rank
// first fills its chunks but the last with p micro-batches each, then two more per later stage.
// Megatron runs everything as warm-up when m == p; that is not copied: it holds m*v activations
// on every rank for no shorter step once sends never block (the test measures both).
int warmup(Schedule s, int p, int rank, int m, int v) {
  switch (s) {
    case Schedule::gpipe:
      return m;
    case Schedule::one_f_one_b:
      return std::min(p - rank - 1, m);
    case Schedule::interleaved:
      return std::min((p - rank - 1) * 2 + (v - 1) * p, m * v);
  }
  return 0;
}

// The k-th forward (or backward) of a rank, as Megatron's get_model_chunk_id and microbatch id:
// micro-batches go in groups of p through chunk 0, then the same group through chunk 1, ...;
// backwards visit the chunks last first. With v = 1 this is simply micro-batch k.
Action nth(Action::Kind kind, int k, int p, int v) {
  int chunk = k % (p * v) / p;
  if (kind == Action::backward) chunk = v - 1 - chunk;
  return {kind, k / (p * v) * p + k % p, chunk};
}

// Largest count of forwards run whose backward has not, over the actions of `chunk` (-1: all).
int peak(const std::vector<Action>& actions, int chunk) {
  int held = 0, most = 0;
  for (const Action& a : actions) {
    if (chunk >= 0 && a.chunk != chunk) continue;
    held += a.kind == Action::forward ? 1 : -1;
    most = std::max(most, held);
  }
  return most;
}

}  // namespace

Schedule parse_schedule(const std::string& name) {
  for (Schedule s : {Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved})
    if (name == schedule_name(s)) return s;
  throw std::invalid_argument("unknown --schedule '" + name + "' (gpipe, 1f1b or interleaved)");
}

std::string_view schedule_name(Schedule s) {
  switch (s) {
    case Schedule::gpipe:
      return "gpipe";
    case Schedule::one_f_one_b:
      return "1f1b";
    case Schedule::interleaved:
      return "interleaved";
  }
  return "?";
}

void check_schedule(Schedule s, int p, int m, int v) {
  auto fail = [](const std::string& what) { throw std::invalid_argument(what); };
  if (p < 1) fail("pipeline stages must be positive, got " + to_string(p));
  if (m < 1) fail("micro-batches must be positive, got " + to_string(m));
  if (v < 1) fail("--virtual-stages must be positive, got " + to_string(v));
  const std::string name(schedule_name(s));
  if (s != Schedule::interleaved) {
    if (v > 1)
      fail("--virtual-stages " + to_string(v) + " needs --schedule interleaved (got " + name + ")");
    return;
  }
  if (v < 2)
    fail("--schedule interleaved needs --virtual-stages 2 or more, got " + to_string(v) +
         " (one chunk per rank is --schedule 1f1b)");
  if (p < 2) fail("--schedule interleaved needs 2 or more pipeline stages, got " + to_string(p));
  if (m % p != 0)
    fail("--schedule interleaved needs the micro-batches (" + to_string(m) +
         ") to be a multiple of the pipeline stages (" + to_string(p) + ")");
}

std::vector<Action> schedule(Schedule s, int p, int rank, int m, int v) {
  check_schedule(s, p, m, v);
  if (rank < 0 || rank >= p)
    throw std::invalid_argument("pipeline rank " + to_string(rank) + " outside 0.." +
                                to_string(p - 1));
  const int total = m * v, warm = warmup(s, p, rank, m, v);
  std::vector<Action> out;
  out.reserve(2 * total);
  for (int k = 0; k < warm; ++k) out.push_back(nth(Action::forward, k, p, v));
  for (int k = 0; k < total - warm; ++k) {  // steady state: forward k + warm, then backward k
    out.push_back(nth(Action::forward, k + warm, p, v));
    out.push_back(nth(Action::backward, k, p, v));
  }
  for (int k = total - warm; k < total; ++k) out.push_back(nth(Action::backward, k, p, v));
  return out;
}

double ideal_bubble(Schedule s, int p, int m, int v) {
  check_schedule(s, p, m, v);
  const int passes = s == Schedule::interleaved ? v * m : m;
  return double(p - 1) / double(passes + p - 1);
}

int peak_in_flight(Schedule s, int p, int rank, int m, int v) {
  return peak(schedule(s, p, rank, m, v), -1);
}

int chunk_slots(Schedule s, int p, int rank, int m, int v, int chunk) {
  std::vector<Action> actions = schedule(s, p, rank, m, v);
  if (chunk < 0 || chunk >= v)
    throw std::invalid_argument("chunk " + to_string(chunk) + " outside 0.." + to_string(v - 1));
  return peak(actions, chunk);
}

std::pair<int, int> stage_layers(int L, int stages, int vs) {
  if (stages < 1) throw std::invalid_argument("stages must be positive, got " + to_string(stages));
  if (stages > L)
    throw std::invalid_argument(to_string(stages) + " stages but only " + to_string(L) + " layers");
  if (vs < 0 || vs >= stages)
    throw std::invalid_argument("virtual stage " + to_string(vs) + " outside 0.." +
                                to_string(stages - 1));
  const int base = L / stages, extra = L % stages;
  const int first = vs * base + std::min(vs, extra);
  return {first, first + base + (vs < extra ? 1 : 0)};
}

}  // namespace gpt::pp
