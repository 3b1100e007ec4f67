// Hierarchical collectives for a group that spans nodes (docs/algorithms.md, "Hierarchical"):
// the intra-node legs run on the node's sub-group (shared memory), the inter-node legs on the
// rails, every local rank driving its own rail at once, so each node pair exchanges 1/L of the
// data per rail instead of the whole buffer over one flat ring.
#include <algorithm>
#include <cstring>
#include <tuple>

#include "algorithms/legs.hpp"
#include "kernels/blocks.hpp"
#include "kernels/reduce_kernels.hpp"

namespace strata::algo {
namespace {

// Chunk of the all-reduce pipeline: big enough that each leg runs at bandwidth, small enough that
// three legs are in flight on a 64 MiB buffer.
constexpr size_t kChunkBytes = 4 << 20;
// Below this an all-reduce is latency-bound: a node all-reduce and one all-reduce per rail take
// the fewest steps (the tail chunk of a larger buffer below it goes as one shard: node reduce,
// one rail, node broadcast). cost_model.cpp's kShardedBytes follows it.
constexpr size_t kShardedBytes = 64 << 10;

// The legs of one all-reduce chunk, issued in turn; each waits for the one before.
struct Chunk {
  size_t first, count;
  int shards;
  std::vector<Leg> pending;
};

}  // namespace

void hierarchical_all_reduce(Exec& e, const Args& a) {
  const auto [in, out, count, dt, op] = std::tuple(a.in, a.out, a.count, a.dtype, a.op);
  Legs h{e};
  const NodeLayout& layout = h.t.layout;
  if (count == 0) return;
  const ReduceOp leg_op = op == ReduceOp::avg ? ReduceOp::sum : op;
  const size_t es = dtype_size(dt);
  const int local_size = h.t.local_size, local_rank = h.t.local_rank;
  const int rails = int(layout.smallest());
  const size_t chunk = std::max<size_t>(kChunkBytes / es / size_t(rails), 1) * size_t(rails);
  if (count * es < kShardedBytes) {
    // Latency-bound: every local rank gets the node's sum from shared memory, then every full
    // rail all-reduces it across the nodes (same inputs, same schedule: the same bits on every
    // rail); ranks beyond the smallest node's size take rank 0's result.
    h.all_reduce(Level::node, view(in, 0, count, dt), view(out, 0, count, dt), leg_op)();
    if (local_rank < rails) h.all_reduce(Level::rail, view(out, 0, count, dt), leg_op)();
    if (!layout.even()) h.broadcast(Level::node, view(out, 0, count, dt), 0)();
    if (op == ReduceOp::avg) kernels::divide_by(out, count, dt, int(layout.node_of_rank.size()));
    return;
  }

  // Leg 1: shard s of the chunk reduced into `out` on local rank s.
  auto reduce_in_node = [&](Chunk& c) {
    kernels::Blocks b{c.count, c.shards};
    if (c.shards == local_size && c.count % size_t(local_size) == 0) {
      c.pending.push_back(h.reduce_scatter(
          Level::node, view(in, c.first, c.count, dt),
          view(out, c.first + b.offset(local_rank), b.count(local_rank), dt), leg_op));
      return;
    }
    for (int s = 0; s < c.shards; ++s) {
      c.pending.push_back(h.reduce(Level::node, view(in, c.first + b.offset(s), b.count(s), dt),
                                   view(out, c.first + b.offset(s), b.count(s), dt), leg_op, s));
    }
  };
  // Leg 2: my shard across nodes, on my rail.
  auto reduce_across_nodes = [&](Chunk& c) {
    if (local_rank >= c.shards) return;
    kernels::Blocks b{c.count, c.shards};
    c.pending.push_back(h.all_reduce(
        Level::rail, view(out, c.first + b.offset(local_rank), b.count(local_rank), dt), leg_op));
  };
  // Leg 3: every shard back to every local rank.
  auto share_in_node = [&](Chunk& c) {
    kernels::Blocks b{c.count, c.shards};
    if (c.shards == local_size && c.count % size_t(local_size) == 0) {
      const size_t each = c.count / size_t(local_size);
      c.pending.push_back(h.all_gather(Level::node,
                                       view(out, c.first + each * size_t(local_rank), each, dt),
                                       view(out, c.first, c.count, dt)));
      return;
    }
    for (int s = 0; s < c.shards; ++s)
      c.pending.push_back(
          h.broadcast(Level::node, view(out, c.first + b.offset(s), b.count(s), dt), s));
  };
  auto finish = [&](Chunk& c) {
    for (const Leg& leg : c.pending) leg();
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
  if (op == ReduceOp::avg) kernels::divide_by(out, count, dt, int(layout.node_of_rank.size()));
}

void hierarchical_all_gather(Exec& e, const Args& a) {
  const auto [in, out, count, dt] = std::tuple(a.in, a.out, a.count, a.dtype);
  Legs h{e};
  const NodeLayout& layout = h.t.layout;
  const size_t bytes = count * dtype_size(dt);
  const size_t nodes = layout.nodes(), local = size_t(h.t.local_size);
  uint8_t* across = h.t.scratch(bytes * nodes * (local + 1));
  uint8_t* everything = across + bytes * nodes;  // [local rank][node] blocks
  // My local index's inputs from every node, then every local index's from my node's peers.
  h.all_gather(Level::rail, view(in, 0, count, dt), view(across, 0, count * nodes, dt))();
  h.all_gather(Level::node, view(across, 0, count * nodes, dt),
               view(everything, 0, count * nodes * local, dt))();
  for (size_t j = 0; j < local; ++j)
    for (size_t m = 0; m < nodes; ++m)
      std::memcpy(static_cast<uint8_t*>(out) + size_t(layout.ranks_of[m][j]) * bytes,
                  everything + (j * nodes + m) * bytes, bytes);
}

void hierarchical_reduce_scatter(Exec& e, const Args& a) {
  const auto [in, out, count, dt, op] = std::tuple(a.in, a.out, a.count, a.dtype, a.op);
  Legs h{e};
  const NodeLayout& layout = h.t.layout;
  const ReduceOp leg_op = op == ReduceOp::avg ? ReduceOp::sum : op;
  const size_t bytes = count * dtype_size(dt);
  const size_t nodes = layout.nodes(), local = size_t(h.t.local_size);
  uint8_t* by_local = h.t.scratch(bytes * nodes * (local + 1));  // [local rank][node] blocks
  uint8_t* mine = by_local + bytes * nodes * local;              // [node] blocks
  for (size_t j = 0; j < local; ++j)
    for (size_t m = 0; m < nodes; ++m)
      std::memcpy(by_local + (j * nodes + m) * bytes,
                  static_cast<const uint8_t*>(in) + size_t(layout.ranks_of[m][j]) * bytes, bytes);
  // Sum over my node of the blocks of every rank with my local index, then over the nodes.
  h.reduce_scatter(Level::node, view(by_local, 0, count * nodes * local, dt),
                   view(mine, 0, count * nodes, dt), leg_op)();
  h.reduce_scatter(Level::rail, view(mine, 0, count * nodes, dt), view(out, 0, count, dt),
                   leg_op)();
  if (op == ReduceOp::avg) kernels::divide_by(out, count, dt, int(layout.node_of_rank.size()));
}

void hierarchical_all_to_all(Exec& e, const Args& args) {
  const auto [in, out, count, dt] = std::tuple(args.in, args.out, args.count, args.dtype);
  Legs h{e};
  const NodeLayout& layout = h.t.layout;
  if (count == 0) return;
  const size_t bytes = count * dtype_size(dt);
  const size_t nodes = layout.nodes(), local = size_t(h.t.local_size), n = nodes * local;
  const auto& ranks_of = layout.ranks_of;
  uint8_t* a = h.t.scratch(2 * n * bytes);
  uint8_t* b = a + n * bytes;
  auto block = [&](const void* base, size_t i) {
    return static_cast<const uint8_t*>(base) + i * bytes;
  };
  // a[j][m]: my block for rank (node m, local j); the node exchange gives b[i][m]: local peer i's
  // block for (m, me).
  for (size_t j = 0; j < local; ++j)
    for (size_t m = 0; m < nodes; ++m)
      std::memcpy(a + (j * nodes + m) * bytes, block(in, size_t(ranks_of[m][j])), bytes);
  h.all_to_all(Level::node, view(a, 0, n * count, dt), view(b, 0, n * count, dt), local)();
  // a[m][i] = b[i][m]: everything my node sends to rail peer m; the rail exchange gives b[m][i]:
  // the block from (m, i) to me.
  for (size_t m = 0; m < nodes; ++m)
    for (size_t i = 0; i < local; ++i)
      std::memcpy(a + (m * local + i) * bytes, b + (i * nodes + m) * bytes, bytes);
  h.all_to_all(Level::rail, view(a, 0, n * count, dt), view(b, 0, n * count, dt), nodes)();
  for (size_t m = 0; m < nodes; ++m)
    for (size_t i = 0; i < local; ++i)
      std::memcpy(static_cast<uint8_t*>(out) + size_t(ranks_of[m][i]) * bytes,
                  b + (m * local + i) * bytes, bytes);
}

}  // namespace strata::algo
