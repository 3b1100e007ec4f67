// Pipeline schedules (trainer/pipeline_schedule.hpp) run on a simulated pipeline with the
// executor's semantics: a pass receives (blocking) right before it runs and sends right after it,
// and sends never block. Every accepted shape must finish, run each pass once, hold what the
// formulas say and, with uniform pass costs, reach the ideal bubble.
#include "trainer/parallel/pipeline_schedule.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace gpt::pp;

const Schedule kSchedules[] = {Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved};
constexpr int kForwardCost = 1, kBackwardCost = 2;

// A step's shape: schedule, pipeline stages, micro-batches, chunks per rank.
struct Shape {
  Schedule s;
  int p, m, v;
};

std::string describe(const Shape& c) {
  return std::string(schedule_name(c.s)) + " p=" + std::to_string(c.p) +
         " m=" + std::to_string(c.m) + " v=" + std::to_string(c.v);
}

// "F2.1" is the forward of micro-batch 2 through chunk 1.
std::string describe(const Action& a) {
  return (a.kind == Action::forward ? "F" : "B") + std::to_string(a.micro) + "." +
         std::to_string(a.chunk);
}

std::string describe(const std::vector<Action>& plan) {
  std::string out;
  for (const Action& a : plan) {
    if (!out.empty()) out += ' ';  // appended piecewise: GCC 12 warns (-Wrestrict) on "" + ...
    out += describe(a);
  }
  return out;
}

bool refused(const Shape& c) {
  try {
    check_schedule(c.s, c.p, c.m, c.v);
    return false;
  } catch (const std::invalid_argument&) {
    return true;
  }
}

using Plans = std::vector<std::vector<Action>>;

Plans plans_of(const Shape& c) {
  Plans plans;
  for (int r = 0; r < c.p; ++r) plans.push_back(schedule(c.s, c.p, r, c.m, c.v));
  return plans;
}

// Every shape the tests sweep: p = 1..4, m = 1..8, v = 1..4, every schedule.
std::vector<Shape> all_shapes() {
  std::vector<Shape> out;
  for (Schedule s : kSchedules)
    for (int p = 1; p <= 4; ++p)
      for (int m = 1; m <= 8; ++m)
        for (int v = 1; v <= 4; ++v) out.push_back({s, p, m, v});
  return out;
}

std::vector<Shape> accepted_shapes() {
  std::vector<Shape> out;
  for (const Shape& c : all_shapes())
    if (!refused(c)) out.push_back(c);
  return out;
}

// What a simulated step did.
struct StepResult {
  std::string error;      // empty: every rank ran its whole plan, each pass exactly once
  int makespan = 0;       // end of the last pass; a forward costs 1, a backward 2
  std::vector<int> busy;  // per rank, same units
};

// p ranks running their plans round-robin, one action per rank per round. Each pass of
// (micro, virtual stage) records how often it ran and when it ended (= when its send left, which
// is when the receiver may have it: communication is free).
class Pipeline {
 public:
  Pipeline(const Shape& c, Plans plans)
      : c_(c),
        stages_(c.p * c.v),
        plans_(std::move(plans)),
        pos_(c.p),
        clock_(c.p),
        busy_(c.p),
        fwd_(c.m * stages_),
        bwd_(c.m * stages_) {}

  StepResult run() {
    for (bool moved = true; moved && error_.empty();) {
      moved = false;
      for (int r = 0; r < c_.p && error_.empty(); ++r)
        if (pos_[r] < plans_[r].size() && step(r)) moved = true;
    }
    if (error_.empty()) check_finished();
    if (error_.empty()) check_counts();
    return {error_, *std::max_element(clock_.begin(), clock_.end()), busy_};
  }

 private:
  struct Pass {
    int runs = 0, end = 0;
  };
  Pass& fwd(int micro, int vs) { return fwd_[micro * stages_ + vs]; }
  Pass& bwd(int micro, int vs) { return bwd_[micro * stages_ + vs]; }

  // Runs rank r's next action unless its receive has no message yet.
  bool step(int r) {
    const Action a = plans_[r][pos_[r]];
    if (a.micro < 0 || a.micro >= c_.m || a.chunk < 0 || a.chunk >= c_.v)
      return fail("rank " + std::to_string(r) + " runs " + describe(a) + ", out of range");
    const int vs = virtual_stage(c_.p, r, a.chunk);
    const bool forward = a.kind == Action::forward;
    if (!forward && fwd(a.micro, vs).runs == 0)  // its own rank's forward: it will never come
      return fail("rank " + std::to_string(r) + " runs " + describe(a) + " before its forward");
    const bool receives = forward ? vs > 0 : vs < stages_ - 1;
    const Pass* in = !receives ? nullptr : forward ? &fwd(a.micro, vs - 1) : &bwd(a.micro, vs + 1);
    if (in && in->runs == 0) return false;  // blocked on the receive
    const int cost = forward ? kForwardCost : kBackwardCost;
    Pass& self = forward ? fwd(a.micro, vs) : bwd(a.micro, vs);
    self.runs++;
    self.end = clock_[r] = std::max(clock_[r], in ? in->end : 0) + cost;
    busy_[r] += cost;
    pos_[r]++;
    return true;
  }

  bool fail(const std::string& why) {
    error_ = describe(c_) + ": " + why;
    return false;
  }

  void check_finished() {
    std::string where;
    bool stuck = false;
    for (int r = 0; r < c_.p; ++r) {
      const size_t at = pos_[r], n = plans_[r].size();
      stuck |= at < n;
      where += " rank " + std::to_string(r) + " at " + std::to_string(at) + "/" +
               std::to_string(n) + (at < n ? " (" + describe(plans_[r][at]) + ")" : "");
    }
    if (stuck) fail("deadlock:" + where);
  }

  void check_counts() {
    for (int k = 0; k < c_.m; ++k)
      for (int vs = 0; vs < stages_; ++vs)
        if (fwd(k, vs).runs != 1 || bwd(k, vs).runs != 1)
          fail("micro " + std::to_string(k) + " at virtual stage " + std::to_string(vs) + " ran " +
               std::to_string(fwd(k, vs).runs) + " forwards and " +
               std::to_string(bwd(k, vs).runs) + " backwards");
  }

  Shape c_;
  int stages_;
  Plans plans_;
  std::vector<size_t> pos_;
  std::vector<int> clock_, busy_;
  std::vector<Pass> fwd_, bwd_;
  std::string error_;
};

StepResult simulate(const Shape& c) { return Pipeline(c, plans_of(c)).run(); }

TEST(PipelineSchedule, EveryAcceptedShapeRunsEveryPassOnceWithoutDeadlock) {
  int accepted = 0, rejected = 0;
  for (const Shape& c : all_shapes()) {
    if (refused(c)) {
      ++rejected;
      for (int r = 0; r < c.p; ++r)
        EXPECT_THROW(schedule(c.s, c.p, r, c.m, c.v), std::invalid_argument) << describe(c);
      EXPECT_FALSE(c.s != Schedule::interleaved && c.v == 1) << describe(c) << " refused";
      continue;
    }
    ++accepted;
    EXPECT_EQ(simulate(c).error, "");
  }
  RecordProperty("accepted", accepted);
  RecordProperty("refused", rejected);
  std::printf("shapes accepted %d, refused %d\n", accepted, rejected);
  // gpipe, 1f1b: v = 1, every p, m (2 * 4 * 8). interleaved: p >= 2, v >= 2, p | m (8 * 3).
  EXPECT_EQ(accepted, 64 + 24);
  EXPECT_EQ(rejected, 3 * 4 * 8 * 4 - 88);
}

TEST(PipelineSchedule, SimulatorFindsADeadlock) {
  // Rank 0 waits for micro 0's gradient before sending micro 1; rank 1 wants micro 1 first.
  const Shape c{Schedule::one_f_one_b, 2, 2, 1};
  using A = Action;
  Plans plans = {
      {{A::forward, 0, 0}, {A::backward, 0, 0}, {A::forward, 1, 0}, {A::backward, 1, 0}},
      {{A::forward, 0, 0}, {A::forward, 1, 0}, {A::backward, 0, 0}, {A::backward, 1, 0}}};
  EXPECT_EQ(Pipeline(c, plans).run().error,
            "1f1b p=2 m=2 v=1: deadlock: rank 0 at 1/4 (B0.0) rank 1 at 1/4 (F1.0)");
  plans[0] = {{A::backward, 0, 0}, {A::forward, 0, 0}, {A::forward, 1, 0}, {A::backward, 1, 0}};
  EXPECT_EQ(Pipeline(c, plans).run().error,
            "1f1b p=2 m=2 v=1: rank 0 runs B0.0 before its forward");
}

TEST(PipelineSchedule, KnownOrders) {
  EXPECT_EQ(describe(schedule(Schedule::gpipe, 3, 1, 3, 1)), "F0.0 F1.0 F2.0 B0.0 B1.0 B2.0");
  EXPECT_EQ(describe(schedule(Schedule::one_f_one_b, 4, 1, 5, 1)),
            "F0.0 F1.0 F2.0 B0.0 F3.0 B1.0 F4.0 B2.0 B3.0 B4.0");
  EXPECT_EQ(describe(schedule(Schedule::one_f_one_b, 4, 3, 2, 1)), "F0.0 B0.0 F1.0 B1.0");
  EXPECT_EQ(describe(schedule(Schedule::one_f_one_b, 4, 0, 2, 1)), "F0.0 F1.0 B0.0 B1.0");
  // Megatron's interleaving, p=2 m=4 v=2: warm-up 4 on rank 0, 2 on rank 1; micro-batches in
  // groups of p per chunk, backwards through the last chunk first.
  EXPECT_EQ(describe(schedule(Schedule::interleaved, 2, 0, 4, 2)),
            "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
  EXPECT_EQ(describe(schedule(Schedule::interleaved, 2, 1, 4, 2)),
            "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0");
}

// Per chunk, forwards and backwards ascend; slot = micro % chunk_slots never collides.
void check_order(const Shape& c, int r) {
  const std::vector<Action> plan = schedule(c.s, c.p, r, c.m, c.v);
  EXPECT_EQ(plan.size(), size_t(2 * c.m * c.v)) << describe(c);
  for (int chunk = 0; chunk < c.v; ++chunk) {
    const int slots = chunk_slots(c.s, c.p, r, c.m, c.v, chunk);
    std::vector<int> holder(slots, -1);
    int next_fwd = 0, next_bwd = 0;
    for (const Action& a : plan) {
      if (a.chunk != chunk) continue;
      const bool forward = a.kind == Action::forward;
      EXPECT_EQ(a.micro, forward ? next_fwd++ : next_bwd++) << describe(c) << " rank " << r;
      int& slot = holder[a.micro % slots];
      EXPECT_EQ(slot, forward ? -1 : a.micro) << describe(c) << " rank " << r << " " << describe(a);
      slot = forward ? a.micro : -1;
    }
  }
}

TEST(PipelineSchedule, EachChunkRunsMicroBatchesInOrder) {
  for (const Shape& c : accepted_shapes())
    for (int r = 0; r < c.p; ++r) check_order(c, r);
}

TEST(PipelineSchedule, PeakInFlightMatchesTheFormulas) {
  for (const Shape& c : accepted_shapes()) {
    for (int r = 0; r < c.p; ++r) {
      const int megatron_warmup = (c.p - r - 1) * 2 + (c.v - 1) * c.p;
      const int expected = c.s == Schedule::gpipe ? c.m
                           : c.s == Schedule::one_f_one_b
                               ? std::min(c.p - r, c.m)
                               : std::min(megatron_warmup + 1, c.m * c.v);
      EXPECT_EQ(peak_in_flight(c.s, c.p, r, c.m, c.v), expected) << describe(c) << " rank " << r;
      if (c.v == 1) {
        EXPECT_EQ(chunk_slots(c.s, c.p, r, c.m, c.v, 0), expected) << describe(c);
      }
    }
  }
  EXPECT_EQ(peak_in_flight(Schedule::one_f_one_b, 4, 0, 8, 1), 4);
  EXPECT_EQ(peak_in_flight(Schedule::one_f_one_b, 4, 3, 8, 1), 1);
  EXPECT_EQ(peak_in_flight(Schedule::interleaved, 4, 0, 8, 2), 11);  // 6 + 4 + 1
  EXPECT_EQ(peak_in_flight(Schedule::interleaved, 4, 3, 8, 2), 5);   // 0 + 4 + 1
  EXPECT_EQ(peak_in_flight(Schedule::interleaved, 2, 0, 2, 3), 6);   // 2 + 4 + 1, capped at 6
  // The same rank-0 step per chunk: chunk 0 fills first and holds every micro-batch at once.
  EXPECT_EQ(chunk_slots(Schedule::interleaved, 4, 0, 8, 2, 0), 8);
  EXPECT_EQ(chunk_slots(Schedule::interleaved, 4, 0, 8, 2, 1), 4);
}

TEST(PipelineSchedule, IdealBubble) {
  EXPECT_DOUBLE_EQ(ideal_bubble(Schedule::gpipe, 2, 4, 1), 1.0 / 5);
  EXPECT_DOUBLE_EQ(ideal_bubble(Schedule::one_f_one_b, 2, 4, 1), 1.0 / 5);
  EXPECT_DOUBLE_EQ(ideal_bubble(Schedule::one_f_one_b, 4, 8, 1), 3.0 / 11);
  EXPECT_DOUBLE_EQ(ideal_bubble(Schedule::interleaved, 2, 4, 2), 1.0 / 9);
  EXPECT_DOUBLE_EQ(ideal_bubble(Schedule::interleaved, 4, 8, 2), 3.0 / 19);
  EXPECT_DOUBLE_EQ(ideal_bubble(Schedule::one_f_one_b, 1, 3, 1), 0.0);
  EXPECT_THROW(ideal_bubble(Schedule::interleaved, 2, 3, 2), std::invalid_argument);
}

// Every rank does the same work, so each rank's bubble is 1 - busy / makespan of the whole step.
// The makespan, in whole cost units, is the exact check; the shares differ by rounding only.
TEST(PipelineSchedule, GPipeAnd1F1BReachTheIdealBubbleWithUniformCosts) {
  for (Schedule s : {Schedule::gpipe, Schedule::one_f_one_b}) {
    for (int p = 2; p <= 4; ++p) {
      for (int m = 1; m <= 8; ++m) {
        const Shape c{s, p, m, 1};
        const StepResult run = simulate(c);
        ASSERT_EQ(run.error, "");
        EXPECT_EQ(run.makespan, (kForwardCost + kBackwardCost) * (m + p - 1)) << describe(c);
        for (int r = 0; r < p; ++r)
          EXPECT_NEAR(1 - double(run.busy[r]) / run.makespan, ideal_bubble(s, p, m, 1), 1e-12)
              << describe(c) << " rank " << r;
      }
    }
  }
}

double simulated_bubble(const Shape& c, const StepResult& run) {
  return 1 - double((kForwardCost + kBackwardCost) * c.m * c.v) / run.makespan;
}

// Interleaving reaches its ideal too, which is below 1F1B's for the same p and m.
TEST(PipelineSchedule, InterleavedReachesItsIdealBubbleBelow1F1B) {
  for (const Shape& c : accepted_shapes()) {
    if (c.s != Schedule::interleaved) continue;
    const StepResult run = simulate(c);
    ASSERT_EQ(run.error, "");
    EXPECT_EQ(run.makespan, (kForwardCost + kBackwardCost) * (c.v * c.m + c.p - 1)) << describe(c);
    EXPECT_NEAR(simulated_bubble(c, run), ideal_bubble(c.s, c.p, c.m, c.v), 1e-12) << describe(c);
    EXPECT_LT(simulated_bubble(c, run), ideal_bubble(Schedule::one_f_one_b, c.p, c.m, 1));
  }
}

// Megatron runs every forward as warm-up when m == p. With sends that never block that buys no
// shorter step and holds m*v activations on every rank, so pipeline_schedule.cpp leaves it out.
TEST(PipelineSchedule, MegatronsAllWarmupWhenMEqualsPGainsNothing) {
  for (const Shape& c : accepted_shapes()) {
    if (c.s != Schedule::interleaved || c.m != c.p) continue;
    Plans all_warmup = plans_of(c);
    for (auto& plan : all_warmup)  // the same forward and backward orders, forwards first
      std::stable_partition(plan.begin(), plan.end(),
                            [](const Action& a) { return a.kind == Action::forward; });
    const StepResult ours = simulate(c), theirs = Pipeline(c, all_warmup).run();
    ASSERT_EQ(theirs.error, "");
    EXPECT_EQ(ours.makespan, theirs.makespan) << describe(c);
    EXPECT_LT(peak_in_flight(c.s, c.p, c.p - 1, c.m, c.v), c.m * c.v) << describe(c);
  }
}

TEST(PipelineSchedule, StageLayersSplitEvenlyWithoutGaps) {
  for (int L = 1; L <= 12; ++L) {
    for (int stages = 1; stages <= L; ++stages) {
      int next = 0;
      for (int vs = 0; vs < stages; ++vs) {
        const auto [first, last] = stage_layers(L, stages, vs);
        EXPECT_EQ(first, next) << L << " layers, " << stages << " stages";
        EXPECT_EQ(last - first, L / stages + (vs < L % stages ? 1 : 0));
        next = last;
      }
      EXPECT_EQ(next, L);
    }
  }
  EXPECT_EQ(stage_layers(6, 4, 0), std::make_pair(0, 2));
  EXPECT_EQ(stage_layers(6, 4, 1), std::make_pair(2, 4));
  EXPECT_EQ(stage_layers(6, 4, 3), std::make_pair(5, 6));
}

template <typename F>
std::string message_of(F f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no exception)";
}

TEST(PipelineSchedule, BadInputMessages) {
  EXPECT_EQ(parse_schedule("gpipe"), Schedule::gpipe);
  EXPECT_EQ(parse_schedule("1f1b"), Schedule::one_f_one_b);
  EXPECT_EQ(parse_schedule("interleaved"), Schedule::interleaved);
  for (Schedule s : kSchedules) EXPECT_EQ(parse_schedule(std::string(schedule_name(s))), s);
  EXPECT_EQ(message_of([] { parse_schedule("1F1B"); }),
            "unknown --schedule '1F1B' (gpipe, 1f1b or interleaved)");

  const Schedule g = Schedule::gpipe, f = Schedule::one_f_one_b, i = Schedule::interleaved;
  EXPECT_EQ(message_of([&] { check_schedule(f, 0, 4, 1); }),
            "pipeline stages must be positive, got 0");
  EXPECT_EQ(message_of([&] { check_schedule(g, 2, 0, 1); }),
            "micro-batches must be positive, got 0");
  EXPECT_EQ(message_of([&] { check_schedule(i, 2, 4, 0); }),
            "--virtual-stages must be positive, got 0");
  EXPECT_EQ(message_of([&] { check_schedule(f, 2, 4, 2); }),
            "--virtual-stages 2 needs --schedule interleaved (got 1f1b)");
  EXPECT_EQ(message_of([&] { check_schedule(i, 2, 4, 1); }),
            "--schedule interleaved needs --virtual-stages 2 or more, got 1 "
            "(one chunk per rank is --schedule 1f1b)");
  EXPECT_EQ(message_of([&] { check_schedule(i, 1, 4, 2); }),
            "--schedule interleaved needs 2 or more pipeline stages, got 1");
  EXPECT_EQ(message_of([&] { check_schedule(i, 4, 6, 2); }),
            "--schedule interleaved needs the micro-batches (6) to be a multiple of the pipeline "
            "stages (4)");
  EXPECT_EQ(message_of([&] { schedule(f, 3, 3, 4, 1); }), "pipeline rank 3 outside 0..2");
  EXPECT_EQ(message_of([&] { chunk_slots(i, 2, 0, 4, 2, 2); }), "chunk 2 outside 0..1");

  EXPECT_EQ(message_of([] { stage_layers(6, 8, 0); }), "8 stages but only 6 layers");
  EXPECT_EQ(message_of([] { stage_layers(6, 0, 0); }), "stages must be positive, got 0");
  EXPECT_EQ(message_of([] { stage_layers(6, 3, 3); }), "virtual stage 3 outside 0..2");
}

}  // namespace
