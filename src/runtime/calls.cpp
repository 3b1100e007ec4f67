#include "runtime/calls.hpp"

#include <cstring>
#include <vector>

#include "algorithms/algorithms.hpp"
#include "bootstrap/await_rank.hpp"
#include "runtime/communicator_impl.hpp"

namespace strata::runtime {

Work call(Group& g, algo::Collective coll, const algo::Args& a) {
  using algo::Collective;
  const size_t n = size_t(g.size), block = a.bytes();
  // What the flight recorder and STRATA_CHECK show, and what the choice sees: one rank's buffer.
  Buffer data{const_cast<void*>(a.in), a.count, a.dtype};
  size_t bytes = block;
  int root = -1, reduce = -1;
  switch (coll) {
    case Collective::all_reduce:
      reduce = int(a.op);
      break;
    case Collective::reduce_scatter:
      reduce = int(a.op);
      data.count = a.count * n;
      bytes = block * n;
      break;
    case Collective::all_gather:
      bytes = block * n;
      break;
    case Collective::all_to_all:
      data.count = a.count * n;
      bytes = block * n;
      break;
    case Collective::broadcast:
      root = a.root;
      data.data = a.out;
      break;
    case Collective::reduce:
      root = a.root;
      reduce = int(a.op);
      break;
    case Collective::all_to_allv:
      throw Error(ErrorCode::internal, g.context("all_to_allv"), "all_to_allv has its own call");
  }
  const algo::Algorithm& algo = g.choose(coll, bytes);
  const char* name = algo::collective_name(coll).data();
  if (coll == Collective::all_to_all) {
    // Equal blocks: the counts the pairwise exchange reads live in the queued closure.
    std::vector<size_t> counts(n, a.count), displs(n);
    for (size_t i = 0; i < n; ++i) displs[i] = a.count * i;
    return g.collective(name, root, data, reduce, bytes, [&algo, a, counts, displs](algo::Exec& e) {
      algo::Args args = a;
      args.send_counts = args.recv_counts = counts.data();
      args.send_displs = args.recv_displs = displs.data();
      algo.run(e, args);
    });
  }
  if (algo.immediate && a.count > 0) {
    const Buffer in{const_cast<void*>(a.in), a.count, a.dtype}, out{a.out, a.count, a.dtype};
    if (auto done = g.small_all_reduce_now(in, out, a.op)) return *done;
  }
  const bool copy_root = coll == Collective::broadcast && g.rank == a.root && a.in != a.out;
  return g.collective(name, root, data, reduce, bytes, [&algo, a, copy_root](algo::Exec& e) {
    if (copy_root) std::memcpy(a.out, a.in, a.bytes());
    if (a.count > 0) algo.run(e, a);
  });
}

Work barrier(Group& g) {
  return g.collective("barrier", -1, Buffer{}, -1, 0,
                      [](algo::Exec& e) { algo::dissemination_barrier(e.p2p); });
}

std::shared_ptr<Group> create_group(const std::shared_ptr<Store>& store, int rank, int size,
                                    const CommOptions& options) {
  try {
    auto g = std::make_shared<Group>(store, rank, size, options);
    // Every rank has read every address once this returns, so rank 0 may retire the store, and
    // the endpoints are wired up before the first timed operation.
    barrier(*g).wait();
    return g;
  } catch (const Error& e) {
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
