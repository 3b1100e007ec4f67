// DiLoCo's state, shared by its files: diloco.cpp (islands, outer steps), island_loss.cpp (an
// island lost: agreement and shrink) and island_join.cpp (an island joining).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "strata/diloco.hpp"
#include "strata/error.hpp"

namespace strata {

// "0,1,3": islands for the log lines.
inline std::string island_list(const std::vector<int>& islands) {
  std::string s;
  for (int i : islands) {
    if (!s.empty()) s += ',';
    s += std::to_string(i);
  }
  return s;
}

// One fragment's exchange, from its start to its application: the pseudo-gradient (the
// all-reduce's buffer, or the unpacked average), the parameters it started from, and the packed
// copies of the quantised exchange.
struct Exchange {
  int fragment = -1;
  std::optional<Work> work;
  std::vector<float> delta, launched;
  std::vector<uint8_t> send, recv;
};

struct DiLoCo::Impl {
  struct Fragment {
    size_t first_unit, last_unit, offset, size;  // units, and their span of shard space
    int64_t due;                                 // exchanged when the inner step % H is this
  };

  // An empty `across`: a joining island's, which DiLoCo::join fills in.
  Impl(ZeroEngine& e, Communicator a, DiLoCoOptions opt)
      : engine(e),
        across(std::move(a)),
        o(opt),
        mine(across ? across.rank() : -1),
        meeting(o.job_store ? o.job_store
                : across    ? across.store()
                            : nullptr) {
    for (int i = 0; across && i < across.size(); ++i) left.push_back(i);
    next_index = int(left.size());
  }

  void check();
  void split();
  bool same_on_every_island();
  void launch(int f, const std::vector<float>& now);
  void start(Exchange& x);
  void apply();
  // island_loss.cpp
  void settle(std::optional<Work> w, const std::function<std::optional<Work>()>& relaunch);
  bool recover(const Error* seen);
  void watch();
  // island_join.cpp
  int64_t join_step() const;
  void admit_joiners();
  void admit(int ticket);

  ZeroEngine& engine;
  Communicator across;
  DiLoCoOptions o;
  std::vector<int> left;  // the islands still training, by first index, in across order
  int mine;               // this island's index
  // Where the islands' first ranks agree: the job's store (o.job_store), else the store of the
  // first `across`, which they all share.
  std::shared_ptr<Store> meeting;
  int agreements = 0;      // recover() calls that found a failure
  bool seen_lost = false;  // watch() logged a failure of `across` not yet agreed on
  int checks = 0;          // admit_joiners() calls
  int admitted = 0;        // islands that joined
  int next_index = 0;      // the index the next island to join takes
  std::vector<float> snapshot, momentum;
  std::vector<Fragment> fragments;
  int64_t inner = 0;  // inner steps so far
  std::optional<Exchange> pending;
  OuterStats stats;
};

}  // namespace strata
