#include "algorithms/registry.hpp"

#include <algorithm>
#include <limits>
#include <sstream>
#include <vector>

#include "base/config.hpp"
#include "base/log.hpp"
#include "strata/error.hpp"

namespace strata::algo {
namespace {

// Every kind's shape and table, in Collective's order.
constexpr Shape kShapes[] = {
    {.name = "all_reduce", .reduces = true},
    {.name = "reduce_scatter", .reduces = true, .chooses_by_all_blocks = true},
    {.name = "all_gather", .chooses_by_all_blocks = true},
    {.name = "all_to_all", .chooses_by_all_blocks = true, .equal_blocks = true},
    {.name = "all_to_allv", .given_blocks = true, .sizes_differ = true},
    {.name = "broadcast", .rooted = true},
    {.name = "reduce", .reduces = true, .rooted = true},
    {.name = "gather", .rooted = true, .chooses_by_all_blocks = true},
    {.name = "scatter", .rooted = true, .chooses_by_all_blocks = true},
    {.name = "barrier"},
};
using Table = std::span<const Algorithm> (*)();
constexpr Table kTables[] = {
    all_reduce_table, reduce_scatter_table, all_gather_table, all_to_all_table, all_to_allv_table,
    broadcast_table,  reduce_table,         gather_table,     scatter_table,    barrier_table};
static_assert(std::size(kShapes) == kCollectives && std::size(kTables) == kCollectives);

constexpr Collective kind(size_t i) { return Collective(i); }

const Algorithm* find(Collective c, std::string_view name) {
  for (const Algorithm& a : algorithms(c)) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

// Every name some table has, in table order, without repeats: STRATA_ALGO's "known:" list.
std::string known_names() {
  std::vector<std::string_view> names;
  for (size_t i = 0; i < kCollectives; ++i) {
    for (const Algorithm& a : algorithms(kind(i))) {
      if (std::find(names.begin(), names.end(), a.name) == names.end()) names.push_back(a.name);
    }
  }
  std::string out;
  for (std::string_view n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

[[noreturn]] void cannot_force(Collective c, const std::string& name, std::string_view why) {
  throw Error(ErrorCode::invalid_argument, {.op = std::string(collective_name(c))},
              "STRATA_ALGO forces " + name + ", which cannot run " +
                  std::string(collective_name(c)) + (why.empty() ? "" : " ") + std::string(why));
}

}  // namespace

const Shape& shape(Collective c) { return kShapes[size_t(c)]; }

std::span<const Algorithm> algorithms(Collective c) { return kTables[size_t(c)](); }

Forced parse_forced(std::string_view spec) {
  Forced forced;
  std::stringstream in{std::string(spec)};
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    const std::string name = eq == std::string::npos ? item : item.substr(eq + 1);
    bool known = false;
    for (size_t i = 0; i < kCollectives; ++i) known = known || find(kind(i), name);
    if (!known) {
      throw Error(ErrorCode::invalid_argument, {.op = "config"},
                  "STRATA_ALGO: unknown algorithm '" + name + "' (known: " + known_names() + ")");
    }
    // A bare name forces every kind whose table has it ("ring": all-reduce, reduce-scatter,
    // all-gather); a named kind is forced even where it cannot run, which choose() reports.
    bool matched = false;
    for (size_t i = 0; i < kCollectives; ++i) {
      const Collective c = kind(i);
      const bool named = eq != std::string::npos && collective_name(c) == item.substr(0, eq);
      if (named || (eq == std::string::npos && find(c, name))) {
        forced[c] = name;
        matched = true;
      }
    }
    if (!matched) {
      throw Error(ErrorCode::invalid_argument, {.op = "config"},
                  "STRATA_ALGO: unknown collective '" + item.substr(0, eq) + "'");
    }
  }
  return forced;
}

Choice choose(Collective c, const GroupView& g, size_t bytes, const Forced& forced) {
  if (auto it = forced.find(c); it != forced.end()) {
    const Algorithm* a = find(c, it->second);
    if (!a) cannot_force(c, it->second, {});
    if (a->can_run(g)) return {a, true};
    if (!a->forced_falls_back) cannot_force(c, it->second, a->cannot_run);
  }
  const Algorithm* best = nullptr;
  double best_cost = std::numeric_limits<double>::infinity();
  for (const Algorithm& a : algorithms(c)) {
    if (!a.can_run(g)) continue;
    const double cost = a.cost(g, bytes);
    if (!best || cost < best_cost) best = &a, best_cost = cost;
  }
  return {best, false};
}

Choice choose(Collective c, const GroupView& g, size_t bytes) {
  static const Forced forced = parse_forced(config().algo);
  return choose(c, g, bytes, forced);
}

void ChoiceLog::note(std::string_view group, const GroupView& g, Collective c, size_t bytes,
                     Choice choice) {
  if (!log::enabled(log::Level::INFO)) return;
  int size_class = 0;
  while ((size_t(1) << (size_class + 1)) <= bytes) ++size_class;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!seen_.insert({int(c), size_class, choice.algo}).second) return;
  }
  // A kind whose ranks' sizes differ chooses once for every size (Shape::sizes_differ).
  const std::string size =
      shape(c).sizes_differ ? " (any size)" : " ~2^" + std::to_string(size_class) + " B";
  STRATA_LOG(INFO, "COLL") << "group " << group << " (" << g.n << " ranks): " << collective_name(c)
                           << size << ": " << choice.algo->name
                           << (choice.forced ? " (STRATA_ALGO)" : "");
}

}  // namespace strata::algo
