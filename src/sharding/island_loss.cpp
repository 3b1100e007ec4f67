#include "sharding/island_loss.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <string>

#include "sharding/diloco_impl.hpp"
#include "sharding/fail.hpp"
#include "strata/error.hpp"

namespace strata::sharding {
namespace {

// The islands as the store carries them.
Bytes encode(const std::vector<int>& v) { return encode_ints({v.begin(), v.end()}); }
std::vector<int> decode(const Bytes& b) {
  const std::vector<int64_t> v = decode_ints(b);
  return {v.begin(), v.end()};
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

Bytes encode_ints(const std::vector<int64_t>& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  return Bytes(p, p + v.size() * sizeof(int64_t));
}

std::vector<int64_t> decode_ints(const Bytes& b) {
  std::vector<int64_t> v(b.size() / sizeof(int64_t));
  std::copy_n(b.begin(), v.size() * sizeof(int64_t), reinterpret_cast<uint8_t*>(v.data()));
  return v;
}

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

namespace strata {

// Waits for w. Watching for lost islands (o.island), a failure anywhere in this island drops the
// islands lost and `relaunch` starts the operation again over the islands left, until it
// completes on every rank of this island.
void DiLoCo::Impl::settle(std::optional<Work> w,
                          const std::function<std::optional<Work>()>& relaunch) {
  std::optional<Error> failed;
  for (;;) {
    if (!failed) try {
        if (w) w->wait();
      } catch (const Error& e) {
        if (!o.island) throw;
        failed = e;
      }
    if (!o.island || !recover(failed ? &*failed : nullptr)) return;
    failed.reset();
    w.reset();
    try {
      w = relaunch();
    } catch (const Error& e) {  // a shrink that failed leaves `across` empty: agree again
      failed = e;
    }
  }
}

// Between exchanges nothing waits on another island, so a death would show only at the next one
// (H steps on): every step asks `across` for news that costs no message (a process of this
// machine gone, a notice, a broken connection) and logs a lost island at once. The agreement and
// the shrink still happen at the exchange, where every island meets.
void DiLoCo::Impl::watch() {
  if (!o.island || !across || across.size() == 1 || seen_lost) return;
  try {
    across.check_health();
  } catch (const Error& e) {
    seen_lost = true;
    const int peer = e.where().peer, S = o.island.size();
    if (peer >= 0 && peer < int(left.size()) && peer != across.rank()) {
      const int lost = left[size_t(peer)];
      std::fprintf(stderr,
                   "strata: DiLoCo: island %d (job ranks %d-%d) lost at inner step %lld (%s); "
                   "dropped at the next exchange\n",
                   lost, lost * S, lost * S + S - 1, (long long)inner, e.what());
    } else {
      std::fprintf(stderr, "strata: DiLoCo: the islands' group failed at inner step %lld (%s)\n",
                   (long long)inner, e.what());
    }
  }
}

// Collective over this island: whether any of its ranks saw the last operation over `across`
// fail, and if so the agreement on the islands left and the new `across`. A failure of the
// island's own all-reduce (a rank of this island died) propagates: this island is lost.
bool DiLoCo::Impl::recover(const Error* seen) {
  const int K = int(std::max_element(left.begin(), left.end())[0]) + 1;
  std::vector<int32_t> flags(size_t(K) + 1, 0);  // [0]: failed here; [1 + j]: island j seen dead
  if (seen) {
    flags[0] = 1;
    const int peer = seen->where().peer;
    if (across && seen->where().group == across.name() && peer >= 0 && peer < int(left.size()))
      flags[1 + size_t(left[size_t(peer)])] = 1;
  }
  o.island.all_reduce(buffer(flags), ReduceOp::max).wait();
  if (!flags[0]) return false;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int> dead;
  for (int j = 0; j < K; ++j)
    if (flags[1 + size_t(j)]) dead.push_back(j);
  std::vector<int32_t> now(left.size(), -1);
  if (o.island.rank() == 0) {
    const std::vector<int> l = sharding::agree_islands_left(*meeting, left, mine, dead, agreements,
                                                            o.agreement_timeout, o.island.rank());
    std::copy(l.begin(), l.end(), now.begin());
  }
  o.island.broadcast(buffer(now), 0).wait();
  ++agreements;
  std::vector<int> exclude, kept;
  for (size_t r = 0; r < left.size(); ++r) {
    if (std::find(now.begin(), now.end(), left[r]) == now.end()) {
      exclude.push_back(int(r));
      stats.lost_islands.push_back(left[r]);
    } else {
      kept.push_back(left[r]);
    }
  }
  const int S = o.island.size();
  for (int r : exclude)
    std::fprintf(
        stderr,
        "strata: DiLoCo: island %d (job ranks %d-%d) lost at inner step %lld; training "
        "goes on with islands %s (agreed in %.0f ms)\n",
        left[size_t(r)], left[size_t(r)] * S, left[size_t(r)] * S + S - 1, (long long)inner,
        island_list(kept).c_str(),
        1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  const std::string name = across ? across.name() : "islands";
  left = kept;
  seen_lost = false;
  try {
    across =
        across.shrink(exclude, CommOptions{.name = name + ".less" + std::to_string(agreements)});
  } catch (const Error&) {
    across = Communicator();
    throw;
  }
  return true;
}

}  // namespace strata
