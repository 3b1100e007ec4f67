#include "sharding/island_loss.hpp"

#include <algorithm>
#include <set>
#include <string>

#include "sharding/fail.hpp"
#include "strata/error.hpp"

namespace strata::sharding {
namespace {

Bytes encode(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += std::to_string(x) + ",";
  return Bytes(s.begin(), s.end());
}
std::vector<int> decode(const Bytes& b) {
  std::vector<int> v;
  std::string cur;
  for (uint8_t c : b) {
    if (c == ',') {
      v.push_back(std::stoi(cur));
      cur.clear();
    } else {
      cur += char(c);
    }
  }
  return v;
}

// The decider's part: waits for every island not known lost to check in, in slices so that a
// loss another island reports ends the wait for that one.
std::vector<int> decide(Store& store, const std::string& base, const std::vector<int>& members,
                        int mine, const std::vector<int>& seen,
                        std::chrono::steady_clock::time_point deadline) {
  std::set<int> lost(seen.begin(), seen.end()), in = {mine};
  constexpr auto kSlice = std::chrono::milliseconds(50);
  for (;;) {
    std::vector<int> waiting;
    for (int j : members)
      if (!lost.count(j) && !in.count(j)) waiting.push_back(j);
    if (waiting.empty()) break;
    if (std::chrono::steady_clock::now() > deadline) {
      lost.insert(waiting.begin(), waiting.end());  // silent past the deadline: gone
      break;
    }
    for (int j : waiting) try {
        const std::vector<int> theirs = decode(store.get(base + "in/" + std::to_string(j), kSlice));
        in.insert(j);
        lost.insert(theirs.begin(), theirs.end());
      } catch (const Error& e) {
        if (e.code() != ErrorCode::timeout) throw;
      }
  }
  std::vector<int> left;
  for (int j : members)
    if (!lost.count(j)) left.push_back(j);
  return left;
}

}  // namespace

std::vector<int> agree_islands_left(Store& store, const std::vector<int>& members, int mine,
                                    const std::vector<int>& seen, int epoch,
                                    std::chrono::milliseconds timeout, int rank) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string base = "diloco/agree" + std::to_string(epoch) + "/";
  store.set(base + "in/" + std::to_string(mine), encode(seen));
  if (store.add(base + "decider", 1) == 1)
    store.set(base + "left", encode(decide(store, base, members, mine, seen, deadline)));
  const std::vector<int> left = decode(store.get(base + "left", timeout));
  if (std::find(left.begin(), left.end(), mine) == left.end())
    fail("DiLoCo", rank,
         "island " + std::to_string(mine) +
             " was dropped by the others (it was seen failing, or checked in too late)",
         ErrorCode::peer_failure);
  return left;
}

}  // namespace strata::sharding
