// The soak: random collectives (every kind, dtype and reduction; counts from 0 to 2^18, roots,
// in place or not), two threads each issuing on its own communicator, every element of every
// result checked against the reference. Every rank draws the same sequence (one seed), so they
// issue the same calls. DISABLED_ in the other runs: CTest runs it for STRATA_SOAK_SECONDS on
// shared memory and on the network (mp_soak_*); benchmarks/soak.sh runs the long form.
#include <atomic>
#include <cstdlib>
#include <random>
#include <thread>

#include "mp.hpp"

using namespace strata;

namespace {

enum Kind {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kAllToAll,
  kAllToAllv,
  kBroadcast,
  kReduce,
  kGather,
  kScatter,
  kBarrier,
  kKinds
};

struct Tally {
  uint64_t calls = 0, elements = 0;
};

// Checks `got` (n elements) against `want`; records the first difference.
void check(const std::vector<uint8_t>& got, size_t at, const std::vector<uint8_t>& want,
           DataType dt, size_t n, const std::string& what, Tally& t) {
  const std::string bad = mp::compare(got.data() + at * dtype_size(dt), want.data(), dt, n);
  EXPECT_EQ(bad, "") << what;
  t.elements += n;
}

// One random call on `c`, drawn from `rng` (the same on every rank), checked.
void one_call(Communicator& c, std::mt19937_64& rng, int salt, Tally& t) {
  const int n = c.size(), me = c.rank();
  const Kind kind = Kind(rng() % kKinds);
  const DataType dt = mp::all_dtypes()[rng() % mp::all_dtypes().size()];
  const ReduceOp op = mp::all_ops()[rng() % mp::all_ops().size()];
  const size_t count = rng() % 16 == 0 ? 0 : size_t(1) << (rng() % 19) | rng() % 64;
  const int root = int(rng() % uint64_t(n));
  const bool in_place = rng() % 2 == 0;
  const std::string what = "call " + std::to_string(t.calls) + ": kind " + std::to_string(kind) +
                           ", " + std::string(dtype_name(dt)) + " x " + std::to_string(count) +
                           ", op " + std::string(op_name(op)) + ", root " + std::to_string(root);
  std::vector<uint8_t> in, out, want;
  auto block = [&](int rank, size_t first, size_t k) {  // rank's data, elements [first, first+k)
    std::vector<uint8_t> b = mp::alloc(dt, k);
    mp::fill(b.data(), dt, k, rank, first, salt);
    return b;
  };
  switch (kind) {
    case kAllReduce:
      in = block(me, 0, count), out = in_place ? in : mp::alloc(dt, count);
      want = mp::alloc(dt, count);
      mp::reference_reduce(want.data(), dt, op, count, n, 0, salt);
      if (in_place) {
        c.all_reduce(mp::view(in, dt), op).wait();
        check(in, 0, want, dt, count, what, t);
      } else {
        c.all_reduce(mp::view(in, dt), mp::view(out, dt), op).wait();
        check(out, 0, want, dt, count, what, t);
      }
      break;
    case kReduceScatter:
      in = block(me, 0, count * n), out = mp::alloc(dt, count), want = mp::alloc(dt, count);
      mp::reference_reduce(want.data(), dt, op, count, n, size_t(me) * count, salt);
      c.reduce_scatter(mp::view(in, dt), mp::view(out, dt), op).wait();
      check(out, 0, want, dt, count, what, t);
      break;
    case kAllGather:
      in = block(me, 0, count), out = mp::alloc(dt, count * n);
      c.all_gather(mp::view(in, dt), mp::view(out, dt)).wait();
      for (int j = 0; j < n; ++j) check(out, j * count, block(j, 0, count), dt, count, what, t);
      break;
    case kAllToAll:  // block j of rank r's input: block(r, j * count); rank j receives it
      in = block(me, 0, count * n), out = mp::alloc(dt, count * n);
      c.all_to_all(mp::view(in, dt), mp::view(out, dt)).wait();
      for (int j = 0; j < n; ++j) {
        check(out, j * count, block(j, size_t(me) * count, count), dt, count, what, t);
      }
      break;
    case kAllToAllv: {  // rank i sends rank j k(i, j) elements, from element 1000 * j
      std::vector<size_t> k(size_t(n) * n);
      for (auto& x : k) x = count == 0 ? 0 : rng() % (count + 1);
      std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
      for (int j = 0, so = 0, ro = 0; j < n; ++j) {
        sc[j] = k[size_t(me) * n + j], sd[j] = size_t(so), so += int(sc[j]);
        rc[j] = k[size_t(j) * n + me], rd[j] = size_t(ro), ro += int(rc[j]);
      }
      in = mp::alloc(dt, sd[n - 1] + sc[n - 1]), out = mp::alloc(dt, rd[n - 1] + rc[n - 1]);
      for (int j = 0; j < n; ++j) {
        const auto b = block(me, 1000 * size_t(j), sc[j]);
        std::copy(b.begin(), b.end(), in.begin() + long(sd[j] * dtype_size(dt)));
      }
      c.all_to_allv(mp::view(in, dt), sc, sd, mp::view(out, dt), rc, rd).wait();
      for (int j = 0; j < n; ++j) {
        check(out, rd[j], block(j, 1000 * size_t(me), rc[j]), dt, rc[j], what, t);
      }
      break;
    }
    case kBroadcast:
      in = me == root ? block(me, 0, count) : mp::alloc(dt, count);
      c.broadcast(mp::view(in, dt), root).wait();
      check(in, 0, block(root, 0, count), dt, count, what, t);
      break;
    case kReduce:
      in = block(me, 0, count), out = mp::alloc(dt, count), want = mp::alloc(dt, count);
      mp::reference_reduce(want.data(), dt, op, count, n, 0, salt);
      c.reduce(mp::view(in, dt), mp::view(out, dt), op, root).wait();
      if (me == root) check(out, 0, want, dt, count, what, t);
      break;
    case kGather:
      in = block(me, 0, count), out = mp::alloc(dt, me == root ? count * n : count);
      c.gather(mp::view(in, dt), mp::view(out, dt), root).wait();
      for (int j = 0; j < n && me == root; ++j) {
        check(out, j * count, block(j, 0, count), dt, count, what, t);
      }
      break;
    case kScatter:  // block j of the root's input: block(root, j * count)
      in = me == root ? block(me, 0, count * n) : mp::alloc(dt, count);
      out = mp::alloc(dt, count);
      c.scatter(mp::view(in, dt), mp::view(out, dt), root).wait();
      check(out, 0, block(root, size_t(me) * count, count), dt, count, what, t);
      break;
    default:
      c.barrier().wait();
  }
  ++t.calls;
}

// Runs random calls on `c` until every rank's time is up (agreed every 8 calls).
Tally soak(Communicator& c, uint64_t seed, std::chrono::seconds length) {
  c.issue_from_this_thread();  // on every rank, before any call on c
  std::mt19937_64 rng(seed);
  Tally t;
  const auto until = Clock::now() + length;
  for (int salt = 1; !::testing::Test::HasFailure(); ++salt) {
    one_call(c, rng, salt, t);
    if (salt % 8 != 0) continue;
    std::vector<int32_t> done = {Clock::now() >= until ? 1 : 0};
    c.all_reduce(buffer(done), ReduceOp::max).wait();
    if (done[0]) break;
  }
  return t;
}

}  // namespace

TEST(Soak, DISABLED_RandomCollectivesOnTwoThreadsAreRightToTheElement) {
  auto& w = mp::world();
  const char* env = std::getenv("STRATA_SOAK_SECONDS");
  const std::chrono::seconds length(env ? std::atoi(env) : 30);
  std::vector<uint64_t> seed = {std::random_device{}()};
  w.broadcast(buffer(seed), 0).wait();  // one sequence for every rank, new each run
  CommOptions o;
  o.name = "soak0";
  Communicator a = w.split(0, w.rank(), o);
  o.name = "soak1";
  Communicator b = w.split(0, w.rank(), o);
  Tally ta, tb;
  std::thread other([&] {
    try {
      tb = soak(b, seed[0] + 1, length);
    } catch (const Error& e) {
      ADD_FAILURE() << "thread 1: " << e.what();
    }
  });
  try {
    ta = soak(a, seed[0], length);
  } catch (const Error& e) {
    ADD_FAILURE() << "thread 0: " << e.what();
  }
  other.join();
  std::printf("soak rank %d (seed %llu): %llu + %llu calls, %llu elements checked\n", w.rank(),
              (unsigned long long)seed[0], (unsigned long long)ta.calls,
              (unsigned long long)tb.calls, (unsigned long long)(ta.elements + tb.elements));
  EXPECT_GT(ta.calls + tb.calls, 0u);
  w.barrier().wait();
}
