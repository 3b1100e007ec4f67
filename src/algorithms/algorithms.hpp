// The collective algorithms. Each is a plain function over the P2P interface, in its own file
// whose header comment gives the schedule and the cost (alpha = per-message latency, beta = time
// per byte on a link, n = ranks, B = bytes). docs/algorithms.md collects them.
//
// Every function is called by all ranks of the group with matching arguments. Counts are in
// elements; `esize` is the element size in bytes.
#pragma once

#include <cstddef>

#include "kernels/blocks.hpp"
#include "strata/types.hpp"
#include "transport/p2p.hpp"
#include "transport/tags.hpp"

namespace strata::algo {

// The algorithms' whole view of the transport.
using transport::P2P;
using transport::Request;
using transport::sendrecv;
namespace tags = transport::tags;
using kernels::Blocks;
using kernels::EqualBlocks;

/// Pipeline chunk of the ring algorithms.
constexpr size_t kRingChunkBytes = 256 * 1024;

// ring_reduce_scatter.cpp
void ring_reduce_scatter(P2P& p, const void* in, void* out, const Blocks& b, DataType dt,
                         ReduceOp op);
void ring_reduce_scatter(P2P& p, const void* in, void* out, const EqualBlocks& b, DataType dt,
                         ReduceOp op);
// ring_all_gather.cpp
void ring_all_gather(P2P& p, void* buf, const Blocks& b, size_t esize);
void ring_all_gather(P2P& p, void* buf, const EqualBlocks& b, size_t esize);
// ring_all_reduce.cpp
void ring_all_reduce(P2P& p, const void* in, void* out, size_t count, DataType dt, ReduceOp op);
// recursive_doubling.cpp
void recursive_doubling_all_reduce(P2P& p, const void* in, void* out, size_t count, DataType dt,
                                   ReduceOp op);
// halving_doubling.cpp
void halving_doubling_all_reduce(P2P& p, const void* in, void* out, size_t count, DataType dt,
                                 ReduceOp op);
// pairwise_all_to_all.cpp
void pairwise_all_to_allv(P2P& p, const void* in, const size_t* send_counts,
                          const size_t* send_displs, void* out, const size_t* recv_counts,
                          const size_t* recv_displs, size_t esize);
// binomial_broadcast.cpp
void binomial_broadcast(P2P& p, const void* in, void* out, size_t bytes, int root);
// binomial_reduce.cpp
void binomial_reduce(P2P& p, const void* in, void* out, size_t count, DataType dt, ReduceOp op,
                     int root);
// linear_gather_scatter.cpp
void linear_gather(P2P& p, const void* in, void* out, size_t bytes, int root);
void linear_scatter(P2P& p, const void* in, void* out, size_t bytes, int root);
// dissemination_barrier.cpp
void dissemination_barrier(P2P& p);

}  // namespace strata::algo
