#include "algorithms/select.hpp"

#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>

#include "base/config.hpp"
#include "base/log.hpp"
#include "strata/error.hpp"

namespace strata::algo {
namespace {

constexpr Collective kAll[] = {Collective::all_reduce, Collective::reduce_scatter,
                               Collective::all_gather, Collective::all_to_all,
                               Collective::broadcast, Collective::reduce};

bool parse_algo(std::string_view s, Algo& out) {
  for (Algo a : {Algo::ring, Algo::shm, Algo::pairwise, Algo::binomial, Algo::recursive_doubling,
                 Algo::halving_doubling, Algo::hierarchical}) {
    if (algo_name(a) == s) {
      out = a;
      return true;
    }
  }
  return false;
}

// STRATA_ALGO, parsed once: collective -> forced algorithm.
const std::map<Collective, Algo>& forced() {
  static const std::map<Collective, Algo> table = [] {
    std::map<Collective, Algo> t;
    std::stringstream in(config().algo);
    std::string item;
    while (std::getline(in, item, ',')) {
      if (item.empty()) continue;
      auto eq = item.find('=');
      Algo a;
      std::string name = eq == std::string::npos ? item : item.substr(eq + 1);
      if (!parse_algo(name, a)) {
        throw Error(ErrorCode::invalid_argument, {.op = "config"},
                    "STRATA_ALGO: unknown algorithm '" + name +
                        "' (known: shm, ring, recursive_doubling, halving_doubling, "
                        "pairwise, binomial, hierarchical)");
      }
      bool matched = false;
      for (Collective c : kAll) {
        if (eq == std::string::npos || collective_name(c) == item.substr(0, eq)) {
          t[c] = a;
          matched = true;
        }
      }
      if (!matched) {
        throw Error(ErrorCode::invalid_argument, {.op = "config"},
                    "STRATA_ALGO: unknown collective '" + item.substr(0, eq) + "'");
      }
    }
    return t;
  }();
  return table;
}

bool hierarchical_runs(Collective c, const GroupShape& g) {
  if (c == Collective::all_reduce) return g.two_level;
  return (c == Collective::all_gather || c == Collective::reduce_scatter ||
          c == Collective::all_to_all) &&
         g.two_level && g.even;
}

// All-to-all moves the same bytes across nodes either way; aggregation saves messages (one per
// node pair and rail instead of one per rank pair) at the price of three local copies, which
// pays while blocks are small.
constexpr size_t kHierarchicalAllToAllMax = 1 << 20;

bool can_run(Algo a, Collective c, bool shm) {
  switch (a) {
    case Algo::hierarchical: return false;  // decided by hierarchical_runs
    case Algo::shm: return shm && c != Collective::reduce;
    case Algo::ring: return c == Collective::all_reduce || c == Collective::reduce_scatter ||
                            c == Collective::all_gather;
    case Algo::pairwise: return c == Collective::all_to_all;
    case Algo::binomial: return c == Collective::broadcast || c == Collective::reduce;
    case Algo::recursive_doubling:
    case Algo::halving_doubling: return c == Collective::all_reduce;
  }
  return false;
}

// Over the network: latency-bound sizes take the fewest steps (recursive doubling, log2 n), the
// middle range halving-doubling (tree latency, ring bandwidth), large messages the ring, whose
// steps each move only B/n and pipeline through every link.
Algo network_default(Collective c, size_t bytes, int n) {
  if (c == Collective::all_reduce && n > 2) {
    if (bytes <= 16 * 1024) return Algo::recursive_doubling;
    if (bytes <= 1024 * 1024) return Algo::halving_doubling;
  }
  if (c == Collective::all_reduce && n == 2 && bytes <= 16 * 1024) return Algo::recursive_doubling;
  switch (c) {
    case Collective::all_to_all: return Algo::pairwise;
    case Collective::broadcast:
    case Collective::reduce: return Algo::binomial;
    default: return Algo::ring;
  }
}

}  // namespace

std::string_view collective_name(Collective c) {
  switch (c) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::all_gather: return "all_gather";
    case Collective::all_to_all: return "all_to_all";
    case Collective::broadcast: return "broadcast";
    case Collective::reduce: return "reduce";
  }
  return "?";
}

std::string_view algo_name(Algo a) {
  switch (a) {
    case Algo::ring: return "ring";
    case Algo::shm: return "shm";
    case Algo::pairwise: return "pairwise";
    case Algo::binomial: return "binomial";
    case Algo::recursive_doubling: return "recursive_doubling";
    case Algo::halving_doubling: return "halving_doubling";
    case Algo::hierarchical: return "hierarchical";
  }
  return "?";
}

void ChoiceLog::note(std::string_view group, int n, Collective c, size_t bytes, Choice choice) {
  if (!log::enabled(log::Level::INFO)) return;
  int size_class = 0;
  while ((size_t(1) << (size_class + 1)) <= bytes) ++size_class;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!seen_.insert({int(c), size_class, int(choice.algo)}).second) return;
  }
  STRATA_LOG(INFO, "COLL") << "group " << group << " (" << n << " ranks): "
                           << collective_name(c) << " ~2^" << size_class << " B: "
                           << algo_name(choice.algo) << (choice.forced ? " (STRATA_ALGO)" : "");
}

Choice choose(Collective c, size_t bytes, const GroupShape& g) {
  const int n = g.n;
  const bool shm = g.shm;
  auto it = forced().find(c);
  if (it != forced().end() && it->second == Algo::hierarchical) {
    if (hierarchical_runs(c, g)) {
      return {Algo::hierarchical, true};
    }
    if (c != Collective::all_reduce && c != Collective::all_gather &&
        c != Collective::reduce_scatter && c != Collective::all_to_all) {
      throw Error(ErrorCode::invalid_argument, {.op = std::string(collective_name(c))},
                  "STRATA_ALGO forces hierarchical, which cannot run " +
                      std::string(collective_name(c)));
    }
  } else if (it != forced().end()) {
    if (!can_run(it->second, c, shm)) {
      throw Error(ErrorCode::invalid_argument, {.op = std::string(collective_name(c))},
                  "STRATA_ALGO forces " + std::string(algo_name(it->second)) + ", which cannot run " +
                      std::string(collective_name(c)) +
                      (it->second == Algo::shm ? " on a group that spans nodes" : ""));
    }
    return {it->second, true};
  }
  // One node: the shared segment beats the network path at every size (one copy in, one out).
  // Several nodes with neighbours: two levels, so the slow links carry each byte once per rail.
  Algo a = shm && can_run(Algo::shm, c, shm) ? Algo::shm
           : hierarchical_runs(c, g) &&
                   (c != Collective::all_to_all || bytes <= kHierarchicalAllToAllMax)
               ? Algo::hierarchical
                                             : network_default(c, bytes, n);
  return {a, false};
}

}  // namespace strata::algo
