// What a hierarchical algorithm starts its legs with: views of its buffers, and one call per
// collective kind on the node's sub-group or the rail (two_level.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "algorithms/registry.hpp"

namespace strata::algo {

inline Buffer view(const void* p, size_t first, size_t count, DataType dt) {
  return Buffer{static_cast<uint8_t*>(const_cast<void*>(p)) + first * dtype_size(dt), count, dt};
}

// The legs, on one level of the collective running as `e`.
struct Legs {
  Exec& e;
  TwoLevel& t = *e.two_level;

  Leg start(Level l, Collective c, const Args& a) { return t.start(l, c, a, e.deadline, e.where); }
  Leg all_reduce(Level l, Buffer in, Buffer out, ReduceOp op) {
    return start(l, Collective::all_reduce,
                 {.in = in.data, .out = out.data, .count = in.count, .dtype = in.dtype, .op = op});
  }
  Leg all_reduce(Level l, Buffer inout, ReduceOp op) { return all_reduce(l, inout, inout, op); }
  Leg reduce_scatter(Level l, Buffer in, Buffer out, ReduceOp op) {
    return start(l, Collective::reduce_scatter,
                 {.in = in.data, .out = out.data, .count = out.count, .dtype = in.dtype, .op = op});
  }
  Leg reduce(Level l, Buffer in, Buffer out, ReduceOp op, int root) {
    return start(l, Collective::reduce,
                 {.in = in.data,
                  .out = out.data,
                  .count = in.count,
                  .dtype = in.dtype,
                  .op = op,
                  .root = root});
  }
  Leg all_gather(Level l, Buffer in, Buffer out) {
    return start(l, Collective::all_gather,
                 {.in = in.data, .out = out.data, .count = in.count, .dtype = in.dtype});
  }
  Leg broadcast(Level l, Buffer inout, int root) {
    return start(l, Collective::broadcast,
                 {.in = inout.data,
                  .out = inout.data,
                  .count = inout.count,
                  .dtype = inout.dtype,
                  .root = root});
  }
  Leg all_to_all(Level l, Buffer in, Buffer out, size_t ranks) {
    return start(l, Collective::all_to_all,
                 {.in = in.data, .out = out.data, .count = in.count / ranks, .dtype = in.dtype});
  }
  // Bytes, blocks contiguous in peer order (counts[i] bytes to and from peer i).
  Leg all_to_allv(Level l, const uint8_t* in, const std::vector<size_t>& send, uint8_t* out,
                  const std::vector<size_t>& recv) {
    std::vector<size_t> sd(send.size()), rd(recv.size());
    for (size_t i = 1; i < send.size(); ++i) {
      sd[i] = sd[i - 1] + send[i - 1], rd[i] = rd[i - 1] + recv[i - 1];
    }
    // call() copies the counts and displacements into the queued call.
    return start(l, Collective::all_to_allv,
                 {.in = in,
                  .out = out,
                  .count = sd.back() + send.back(),
                  .dtype = DataType::u8,
                  .send_counts = send.data(),
                  .send_displs = sd.data(),
                  .recv_counts = recv.data(),
                  .recv_displs = rd.data()});
  }
};

}  // namespace strata::algo
