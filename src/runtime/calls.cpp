// The one dispatch path: every collective kind, from the public API or a hierarchical leg,
// becomes a queued operation here, its algorithm chosen from its kind's table; a small call
// whose algorithm has a fast path (algo::Now) may complete inside the caller instead.
#include "runtime/calls.hpp"

#include <unistd.h>

#include <cstdint>
#include <vector>

#include "bootstrap/await_rank.hpp"
#include "runtime/communicator_impl.hpp"
#include "runtime/setup_store.hpp"
#include "transport/ucx/factory.hpp"

namespace strata::runtime {
namespace {

// A communicator's collectives are issued by one thread, the one that created it (or took it
// over: Communicator::issue_from_this_thread), so that every rank issues them in one order
// (README, "Threads"). Two threads issuing on one communicator give the ranks different orders,
// and the peers would combine one call's data with another's, silently; no check of a single
// rank can see that, so another thread's call is refused before it takes a sequence number.
int this_thread_id() {
  static thread_local const int tid = int(::gettid());
  return tid;
}

void check_issuer(Group& g, std::string_view op) {
  const int issuer = g.issuer.load(std::memory_order_relaxed);
  if (issuer == 0 || issuer == this_thread_id()) return;
  throw Error(ErrorCode::invalid_argument, g.context(op.data()),
              "thread " + std::to_string(this_thread_id()) + " issued " + std::string(op) +
                  " on a communicator whose collectives thread " + std::to_string(issuer) +
                  " issues: one thread issues a communicator's collectives, so that every rank "
                  "issues them in one order (hand it over with issue_from_this_thread() on every "
                  "rank, or give each thread its own communicator)");
}

}  // namespace

void issue_from_this_thread(Group& g) {
  if (g.issuer.load(std::memory_order_relaxed) != 0) g.issuer.store(this_thread_id());
}

Work call(Group& g, algo::Collective coll, const algo::Args& given, const Placement& at) {
  if (at.memory == MemoryKind::cuda) {
    check_issuer(g, algo::collective_name(coll));
    return device_call(g, coll, given, at);
  }
  const algo::Shape& shape = algo::shape(coll);
  // A buffer of 0 elements may be null (as in NCCL); the algorithms, which run for it too, get
  // an address instead, so that no copy of 0 bytes is handed a null pointer (undefined in C).
  // (A null all_to_allv buffer holds 0 elements: its blocks were checked to fit.)
  static uint8_t nothing;
  algo::Args a = given;
  if (a.count == 0 || shape.given_blocks) {
    if (!a.in) a.in = &nothing;
    if (!a.out) a.out = &nothing;
  }
  check_issuer(g, shape.name);
  const size_t n = size_t(g.size);
  // What the choice and the op queue go by (how soon to start a call nobody waits for yet).
  const size_t bytes = shape.chooses_by_all_blocks ? a.bytes() * n : a.bytes();
  const algo::Algorithm& algo = g.choose(coll, shape.sizes_differ ? 0 : bytes);
  if (algo.now && a.count > 0) {
    if (auto done = g.try_now(algo, coll, a)) return *done;
  }
  // What the flight recorder, STRATA_CHECK and mismatch messages show: the call's count (per
  // rank, as NCCL counts: reduce_scatter's output, all_to_all's block). A call of 0 elements
  // runs too, so that a peer in a non-empty call finds the mismatch (docs/architecture.md,
  // "Mismatches").
  const Buffer data{const_cast<void*>(a.in), a.count, a.dtype};
  // all_to_all(v)'s counts and displacements, owned by the queued call: send counts, send
  // displacements, receive counts, receive displacements, n each.
  std::vector<size_t> blocks;
  if (shape.equal_blocks) {
    blocks.resize(4 * n);
    for (size_t i = 0; i < n; ++i) {
      blocks[i] = blocks[2 * n + i] = a.count;
      blocks[n + i] = blocks[3 * n + i] = a.count * i;
    }
  } else if (shape.given_blocks) {
    for (const size_t* given : {a.send_counts, a.send_displs, a.recv_counts, a.recv_displs})
      blocks.insert(blocks.end(), given, given + n);
  }
  return g.collective(algo::collective_name(coll).data(), shape.rooted ? a.root : -1, data,
                      shape.reduces ? int(a.op) : -1, bytes,
                      [&algo, a, blocks = std::move(blocks), n](algo::Exec& e) {
                        algo::Args args = a;
                        if (!blocks.empty()) {
                          args.send_counts = blocks.data();
                          args.send_displs = blocks.data() + n;
                          args.recv_counts = blocks.data() + 2 * n;
                          args.recv_displs = blocks.data() + 3 * n;
                        }
                        algo.run(e, args);
                      });
}

std::shared_ptr<Group> create_group(const std::shared_ptr<Store>& store, int rank, int size,
                                    const CommOptions& options, bool any_thread) {
  try {
    auto setup = std::make_shared<SetupStore>(store);
    auto g = std::make_shared<Group>(setup, rank, size, options);
    if (!any_thread) g->issuer.store(this_thread_id(), std::memory_order_relaxed);
    // Every rank has read every address once this returns, so each may erase what it published,
    // and the endpoints are wired up before the first timed operation.
    call(*g, algo::Collective::barrier, {}).wait();
    setup->erase_setup_records();
    return g;
  } catch (const Error& e) {
    ucx::quiet_after_failure();  // its error says what UCX would repeat
    // A rank whose setup failed reported its culprit before exiting, so the process table may
    // show it dead beside that culprit, and its rank may be the first one looked at: its report
    // names the rank that failed first (kill_test caught rank 3 naming rank 1, which had reported
    // rank 2's death during setup and exited while rank 3 waited in this barrier).
    if (auto report = bootstrap::reported_failure(*store, e.where())) throw *report;
    bootstrap::report_failure(*store, e);  // ranks still setting up fail at once, naming the same
    throw;
  }
}

}  // namespace strata::runtime
