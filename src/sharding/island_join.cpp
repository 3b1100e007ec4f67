// An island joining a running job (DiLoCo::join) and the running islands admitting it. Every H
// steps, at a step with no exchange in flight, the islands' first ranks learn through the job's
// store how many islands asked to join (the first to look fixes the count for all), and the next
// one waiting is admitted: a new `across` per place in the island, with the joiner last, over
// which the first island sends it its state.
#include <algorithm>
#include <cstdio>
#include <string>

#include "sharding/checkpoint.hpp"
#include "sharding/diloco_impl.hpp"
#include "sharding/fail.hpp"
#include "sharding/island_loss.hpp"

namespace strata {
namespace {

const std::string kJoin = "diloco/join/";
constexpr uint32_t kStateTag = 0x4a4f494e;  // "JOIN"

using sharding::decode_ints;
using sharding::encode_ints;

// Island rank 0's vector, of any length, on every rank of the island.
void share(Communicator& island, std::vector<int64_t>& v) {
  std::vector<int64_t> n{int64_t(v.size())};
  island.broadcast(buffer(n), 0).wait();
  v.resize(size_t(n[0]));
  island.broadcast(buffer(v), 0).wait();
}

uint64_t hash(const std::vector<float>& v) {
  return sharding::fnv1a(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float));
}

Communicator grown_across(const std::shared_ptr<Store>& meeting, int64_t ticket, int place,
                          int rank, int size, int index) {
  return Communicator::create(
      std::make_shared<PrefixStore>(
          meeting, kJoin + std::to_string(ticket) + "/across" + std::to_string(place)),
      rank, size, CommOptions{.name = "islands+" + std::to_string(index)});
}

}  // namespace

// The step of each period (mod H) at whose end no exchange is in flight: the period's boundary
// without streaming; with fragments, the first step at which none is due. -1: none (F = H).
int64_t DiLoCo::Impl::join_step() const {
  if (fragments.size() == 1) return 0;
  for (int64_t t = 1; t < o.outer_every; ++t)
    if (std::none_of(fragments.begin(), fragments.end(),
                     [&](const Fragment& f) { return f.due == t; }))
      return t;
  return -1;
}

void DiLoCo::Impl::admit_joiners() {
  std::vector<int64_t> count{0};
  if (o.island.rank() == 0) {
    const std::string at = kJoin + "check" + std::to_string(checks) + "/";
    if (meeting->add(at + "decider", 1) == 1) {
      count[0] = meeting->add(kJoin + "requests", 0);
      meeting->set(at + "count", encode_ints(count));
      // Every island's first rank passed the last check before the exchange that led here.
      const std::string last = kJoin + "check" + std::to_string(checks - 1) + "/";
      meeting->erase(last + "decider");
      meeting->erase(last + "count");
    } else {
      count = decode_ints(meeting->get(at + "count", o.agreement_timeout));
    }
  }
  ++checks;
  o.island.broadcast(buffer(count), 0).wait();
  // One per check: an island admitted now takes part in admitting the next, from the next check.
  if (admitted < count[0]) admit(++admitted);
}

void DiLoCo::Impl::admit(int ticket) {
  const int index = next_index++;
  std::vector<int> grown = left;
  grown.push_back(index);
  // What the joiner needs to continue in step with the others; every first rank sets the same.
  std::vector<int64_t> info{index, inner, checks, agreements, next_index};
  info.insert(info.end(), grown.begin(), grown.end());
  if (o.island.rank() == 0)
    meeting->set(kJoin + std::to_string(ticket) + "/admitted", encode_ints(info));
  const int me = int(std::find(grown.begin(), grown.end(), mine) - grown.begin());
  across = grown_across(meeting, ticket, o.island.rank(), me, int(grown.size()), index);
  left = grown;
  stats.joined_islands.push_back(index);
  std::string sent;
  if (across.rank() == 0) {  // the first island's rank at this place sends its state
    const int to = across.size() - 1;
    std::vector<float> now = engine.shard_params();
    std::vector<int64_t> head{int64_t(now.size()), inner};
    across.send(buffer(head), to, kStateTag).wait();
    for (std::vector<float>* v : {&now, &snapshot, &momentum})
      across.send(buffer(*v), to, kStateTag).wait();
    char h[64];
    std::snprintf(h, sizeof h, "; sent it parameters fnv1a %016llx", (unsigned long long)hash(now));
    sent = h;
  }
  std::fprintf(stderr, "strata: DiLoCo: island %d joined at inner step %lld; islands now %s%s\n",
               index, (long long)inner, island_list(left).c_str(), sent.c_str());
}

std::unique_ptr<DiLoCo> DiLoCo::join(ZeroEngine& engine, DiLoCoOptions options) {
  if (!options.island || !options.job_store)
    sharding::fail("DiLoCo.join", -1,
                   "needs options.island (the joining island's group) and options.job_store "
                   "(the running job's store)");
  auto impl = std::make_unique<Impl>(engine, Communicator(), std::move(options));
  Impl& I = *impl;
  I.check();
  I.split();
  if (I.join_step() < 0)
    sharding::fail("DiLoCo.join", I.o.island.rank(),
                   "every step exchanges a fragment (fragments = outer_every): no island can join");
  std::vector<int64_t> info;
  if (I.o.island.rank() == 0) {
    const int64_t ticket = I.meeting->add(kJoin + "requests", 1);
    info =
        decode_ints(I.meeting->get(kJoin + std::to_string(ticket) + "/admitted", I.o.join_timeout));
    info.insert(info.begin(), ticket);
  }
  share(I.o.island, info);
  const int64_t ticket = info[0];
  I.mine = int(info[1]);
  I.inner = info[2], I.checks = int(info[3]), I.agreements = int(info[4]);
  I.next_index = int(info[5]), I.admitted = int(ticket);
  I.left.assign(info.begin() + 6, info.end());
  const int size = int(I.left.size());
  I.across = grown_across(I.meeting, ticket, I.o.island.rank(), size - 1, size, I.mine);
  // All of it received before any check, so that a joiner laid out differently cannot leave the
  // sender waiting.
  std::vector<int64_t> head(2);
  I.across.recv(buffer(head), 0, kStateTag).wait();
  const size_t n = size_t(head[0]);
  std::vector<float> now(n), snapshot(n), momentum(n);
  for (std::vector<float>* v : {&now, &snapshot, &momentum})
    I.across.recv(buffer(*v), 0, kStateTag).wait();
  if (now.size() != engine.layout().shard_numel())
    sharding::fail("DiLoCo.join", I.o.island.rank(),
                   "the running islands' shard here has " + std::to_string(now.size()) +
                       " elements, this island's " + std::to_string(engine.layout().shard_numel()) +
                       ": another model or layout");
  engine.set_shard_params(now);
  engine.set_steps_done(head[1]);
  I.inner = head[1];
  I.snapshot = std::move(snapshot);
  I.momentum = std::move(momentum);
  std::fprintf(stderr,
               "strata: DiLoCo: joined as island %d at inner step %lld; islands now %s; "
               "parameters fnv1a %016llx from island %d\n",
               I.mine, (long long)I.inner, island_list(I.left).c_str(),
               (unsigned long long)hash(engine.shard_params()), I.left[0]);
  return std::unique_ptr<DiLoCo>(new DiLoCo(std::move(impl)));
}

}  // namespace strata
