#include "runtime/hierarchical.hpp"

#include <algorithm>
#include <cstring>

#include "algorithms/algorithms.hpp"
#include "kernels/reduce_kernels.hpp"
#include "runtime/calls.hpp"
#include "runtime/communicator_impl.hpp"

namespace strata::runtime {
namespace {

// Chunk of the all-reduce pipeline: big enough that each leg runs at bandwidth, small enough that
// three legs are in flight on a 64 MiB buffer.
constexpr size_t kChunkBytes = 4 << 20;
// Below this an all-reduce is latency-bound: a node all-reduce and one all-reduce per rail take
// the fewest steps (the tail chunk of a larger buffer below it goes as one shard: node reduce,
// one rail, node broadcast).
constexpr size_t kShardedBytes = 64 << 10;

Buffer view(const void* p, size_t first, size_t count, DataType dt) {
  return Buffer{static_cast<uint8_t*>(const_cast<void*>(p)) + first * dtype_size(dt), count, dt};
}

// The legs: collectives on the node and rail groups' own state (runtime/calls.hpp), with the
// arguments this file builds, so the public API's checks are not run again.
Work all_reduce(Group& g, Buffer in, Buffer out, ReduceOp op) {
  return call(g, algo::Collective::all_reduce,
              {.in = in.data, .out = out.data, .count = in.count, .dtype = in.dtype, .op = op});
}
Work all_reduce(Group& g, Buffer inout, ReduceOp op) { return all_reduce(g, inout, inout, op); }
Work reduce_scatter(Group& g, Buffer in, Buffer out, ReduceOp op) {
  return call(g, algo::Collective::reduce_scatter,
              {.in = in.data, .out = out.data, .count = out.count, .dtype = in.dtype, .op = op});
}
Work reduce(Group& g, Buffer in, Buffer out, ReduceOp op, int root) {
  return call(g, algo::Collective::reduce,
              {.in = in.data,
               .out = out.data,
               .count = in.count,
               .dtype = in.dtype,
               .op = op,
               .root = root});
}
Work all_gather(Group& g, Buffer in, Buffer out) {
  return call(g, algo::Collective::all_gather,
              {.in = in.data, .out = out.data, .count = in.count, .dtype = in.dtype});
}
Work broadcast(Group& g, Buffer inout, int root) {
  return call(g, algo::Collective::broadcast,
              {.in = inout.data,
               .out = inout.data,
               .count = inout.count,
               .dtype = inout.dtype,
               .root = root});
}
Work all_to_all(Group& g, Buffer in, Buffer out) {
  return call(
      g, algo::Collective::all_to_all,
      {.in = in.data, .out = out.data, .count = in.count / size_t(g.size), .dtype = in.dtype});
}

void wait(const Work& w, Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  w.wait(std::max(left, std::chrono::milliseconds(1)));
}

// The legs of one all-reduce chunk, issued in turn; each waits for the one before.
struct Chunk {
  size_t first, count;
  int shards;
  std::vector<Work> pending;
};

}  // namespace

void hierarchical_all_reduce(SubGroups& h, const void* in, void* out, size_t count, DataType dt,
                             ReduceOp op, Clock::time_point deadline) {
  if (count == 0) return;
  const ReduceOp leg_op = op == ReduceOp::avg ? ReduceOp::sum : op;
  const size_t es = dtype_size(dt);
  const int local_size = h.local->size;
  const int rails = int(h.layout.smallest());
  const size_t chunk = std::max<size_t>(kChunkBytes / es / size_t(rails), 1) * size_t(rails);
  if (count * es < kShardedBytes) {
    // Latency-bound: every local rank gets the node's sum from shared memory, then every full
    // rail all-reduces it across the nodes (same inputs, same schedule: the same bits on every
    // rail); ranks beyond the smallest node's size take rank 0's result.
    wait(all_reduce(*h.local, view(in, 0, count, dt), view(out, 0, count, dt), leg_op), deadline);
    if (h.local_rank < rails) wait(all_reduce(*h.rail, view(out, 0, count, dt), leg_op), deadline);
    if (!h.layout.even()) wait(broadcast(*h.local, view(out, 0, count, dt), 0), deadline);
    if (op == ReduceOp::avg) kernels::divide_by(out, count, dt, int(h.layout.node_of_rank.size()));
    return;
  }

  // Leg 1: shard s of the chunk reduced into `out` on local rank s.
  auto reduce_in_node = [&](Chunk& c) {
    kernels::Blocks b{c.count, c.shards};
    if (c.shards == local_size && c.count % size_t(local_size) == 0) {
      c.pending.push_back(reduce_scatter(
          *h.local, view(in, c.first, c.count, dt),
          view(out, c.first + b.offset(h.local_rank), b.count(h.local_rank), dt), leg_op));
      return;
    }
    for (int s = 0; s < c.shards; ++s) {
      c.pending.push_back(reduce(*h.local, view(in, c.first + b.offset(s), b.count(s), dt),
                                 view(out, c.first + b.offset(s), b.count(s), dt), leg_op, s));
    }
  };
  // Leg 2: my shard across nodes, on my rail.
  auto reduce_across_nodes = [&](Chunk& c) {
    if (h.local_rank >= c.shards) return;
    kernels::Blocks b{c.count, c.shards};
    c.pending.push_back(all_reduce(
        *h.rail, view(out, c.first + b.offset(h.local_rank), b.count(h.local_rank), dt), leg_op));
  };
  // Leg 3: every shard back to every local rank.
  auto share_in_node = [&](Chunk& c) {
    kernels::Blocks b{c.count, c.shards};
    if (c.shards == local_size && c.count % size_t(local_size) == 0) {
      const size_t each = c.count / size_t(local_size);
      c.pending.push_back(all_gather(*h.local,
                                     view(out, c.first + each * size_t(h.local_rank), each, dt),
                                     view(out, c.first, c.count, dt)));
      return;
    }
    for (int s = 0; s < c.shards; ++s)
      c.pending.push_back(broadcast(*h.local, view(out, c.first + b.offset(s), b.count(s), dt), s));
  };
  auto finish = [&](Chunk& c) {
    for (const Work& w : c.pending) wait(w, deadline);
    c.pending.clear();
  };

  std::vector<Chunk> chunks;
  for (size_t first = 0; first < count; first += chunk) {
    Chunk c{first, std::min(chunk, count - first), 1, {}};
    if (c.count * es >= kShardedBytes) c.shards = int(std::min<size_t>(size_t(rails), c.count));
    chunks.push_back(std::move(c));
  }
  // Pipeline: the rail always has the next chunk queued behind the one crossing the nodes, while
  // the node reduces two chunks ahead and spreads the one before.
  const size_t k_max = chunks.size();
  for (size_t k = 0; k < std::min<size_t>(2, k_max); ++k) reduce_in_node(chunks[k]);
  for (size_t k = 0; k < k_max; ++k) {
    finish(chunks[k]);
    reduce_across_nodes(chunks[k]);
    if (k + 2 < k_max) reduce_in_node(chunks[k + 2]);
    if (k >= 1) {
      finish(chunks[k - 1]);
      share_in_node(chunks[k - 1]);
    }
    if (k >= 2) finish(chunks[k - 2]);
  }
  finish(chunks[k_max - 1]);
  share_in_node(chunks[k_max - 1]);
  for (size_t k = k_max >= 2 ? k_max - 2 : 0; k < k_max; ++k) finish(chunks[k]);
  if (op == ReduceOp::avg) kernels::divide_by(out, count, dt, int(h.layout.node_of_rank.size()));
}

void hierarchical_all_gather(SubGroups& h, const void* in, void* out, size_t count, DataType dt,
                             Clock::time_point deadline) {
  const size_t bytes = count * dtype_size(dt);
  const size_t nodes = h.layout.nodes(), local = size_t(h.local->size);
  uint8_t* across = h.scratch_of(bytes * nodes * (local + 1));
  uint8_t* everything = across + bytes * nodes;  // [local rank][node] blocks
  // My local index's inputs from every node, then every local index's from my node's peers.
  wait(all_gather(*h.rail, view(in, 0, count, dt), view(across, 0, count * nodes, dt)), deadline);
  wait(all_gather(*h.local, view(across, 0, count * nodes, dt),
                  view(everything, 0, count * nodes * local, dt)),
       deadline);
  for (size_t j = 0; j < local; ++j)
    for (size_t m = 0; m < nodes; ++m)
      std::memcpy(static_cast<uint8_t*>(out) + size_t(h.layout.ranks_of[m][j]) * bytes,
                  everything + (j * nodes + m) * bytes, bytes);
}

void hierarchical_reduce_scatter(SubGroups& h, const void* in, void* out, size_t count, DataType dt,
                                 ReduceOp op, Clock::time_point deadline) {
  const ReduceOp leg_op = op == ReduceOp::avg ? ReduceOp::sum : op;
  const size_t bytes = count * dtype_size(dt);
  const size_t nodes = h.layout.nodes(), local = size_t(h.local->size);
  uint8_t* by_local = h.scratch_of(bytes * nodes * (local + 1));  // [local rank][node] blocks
  uint8_t* mine = by_local + bytes * nodes * local;               // [node] blocks
  for (size_t j = 0; j < local; ++j)
    for (size_t m = 0; m < nodes; ++m)
      std::memcpy(by_local + (j * nodes + m) * bytes,
                  static_cast<const uint8_t*>(in) + size_t(h.layout.ranks_of[m][j]) * bytes, bytes);
  // Sum over my node of the blocks of every rank with my local index, then over the nodes.
  wait(reduce_scatter(*h.local, view(by_local, 0, count * nodes * local, dt),
                      view(mine, 0, count * nodes, dt), leg_op),
       deadline);
  wait(reduce_scatter(*h.rail, view(mine, 0, count * nodes, dt), view(out, 0, count, dt), leg_op),
       deadline);
  if (op == ReduceOp::avg) kernels::divide_by(out, count, dt, int(h.layout.node_of_rank.size()));
}

void hierarchical_all_to_all(SubGroups& h, const void* in, void* out, size_t count, DataType dt,
                             Clock::time_point deadline) {
  const size_t bytes = count * dtype_size(dt);
  const size_t nodes = h.layout.nodes(), local = size_t(h.local->size), n = nodes * local;
  const auto& ranks_of = h.layout.ranks_of;
  uint8_t* a = h.scratch_of(2 * n * bytes);
  uint8_t* b = a + n * bytes;
  auto block = [&](const void* base, size_t i) {
    return static_cast<const uint8_t*>(base) + i * bytes;
  };
  // a[j][m]: my block for rank (node m, local j); the node exchange gives b[i][m]: local peer i's
  // block for (m, me).
  for (size_t j = 0; j < local; ++j)
    for (size_t m = 0; m < nodes; ++m)
      std::memcpy(a + (j * nodes + m) * bytes, block(in, size_t(ranks_of[m][j])), bytes);
  wait(all_to_all(*h.local, view(a, 0, n * count, dt), view(b, 0, n * count, dt)), deadline);
  // a[m][i] = b[i][m]: everything my node sends to rail peer m; the rail exchange gives b[m][i]:
  // the block from (m, i) to me.
  for (size_t m = 0; m < nodes; ++m)
    for (size_t i = 0; i < local; ++i)
      std::memcpy(a + (m * local + i) * bytes, b + (i * nodes + m) * bytes, bytes);
  wait(all_to_all(*h.rail, view(a, 0, n * count, dt), view(b, 0, n * count, dt)), deadline);
  for (size_t m = 0; m < nodes; ++m)
    for (size_t i = 0; i < local; ++i)
      std::memcpy(static_cast<uint8_t*>(out) + size_t(ranks_of[m][i]) * bytes,
                  b + (m * local + i) * bytes, bytes);
}

}  // namespace strata::runtime
