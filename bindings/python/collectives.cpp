// Communicator's collectives and send/recv: each converts its Python buffers (Buffers), issues
// with the GIL released and returns a Work at once, which holds the buffers until it completes.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <vector>

#include "bindings.hpp"
#include "strata/error.hpp"

namespace strata::py {
namespace {

using namespace nb::literals;

// Issues the operation `f` with the GIL released (a small all-reduce may poll its peers for a
// moment) and wraps the Work with the buffers `b` collected.
template <typename F>
PyWork issue(Communicator& c, Buffers& b, F&& f) {
  sweep_parked();
  Work w;
  {
    nb::gil_scoped_release unlocked;
    w = f();
  }
  return PyWork(std::move(w), c, b.take());
}

// A buffer only the root converts (gather's output, scatter's and reduce's on the root): a
// conversion that fails (not a buffer, read-only, strided) is told to the other ranks first, so
// that their call fails naming this rank at once instead of waiting for it, then raised as it was.
template <typename Convert>
Buffer root_buffer(Communicator& c, const char* op, int root, Buffer data, ReduceOp o,
                   Convert convert) {
  try {
    return convert();
  } catch (const std::exception& e) {
    try {
      nb::gil_scoped_release unlocked;  // it waits for the notice to leave
      c.refuse_root_call(op, root, data, o, e.what());
    } catch (const Error&) {  // the same reason, which the conversion's own error gives
    }
    throw;
  }
}

std::vector<size_t> prefix_sums(const std::vector<size_t>& counts) {
  std::vector<size_t> d(counts.size());
  size_t at = 0;
  for (size_t i = 0; i < counts.size(); ++i) d[i] = at, at += counts[i];
  return d;
}

}  // namespace

void register_collectives(nb::module_&) {
  nb::borrow<nb::class_<Communicator>>(nb::type<Communicator>())
      .def(
          "all_reduce",
          [](Communicator& c, nb::handle input, nb::handle output, const OpArg& op) {
            const ReduceOp o = parse_op(op);
            Buffers b("all_reduce");
            if (output.is_none()) {
              const Buffer io = b.output(input, "input (in place)");
              return issue(c, b, [&] { return c.all_reduce(io, o); });
            }
            const Buffer in = b.input(input, "input"), out = b.output(output, "output");
            return issue(c, b, [&] { return c.all_reduce(in, out, o); });
          },
          "input"_a, "output"_a.none() = nb::none(), "op"_a = "sum",
          "Element-wise reduction; every rank receives the result in output (in input when "
          "output is None).")
      .def(
          "reduce_scatter",
          [](Communicator& c, nb::handle input, nb::handle output, const OpArg& op) {
            const ReduceOp o = parse_op(op);
            Buffers b("reduce_scatter");
            const Buffer in = b.input(input, "input"), out = b.output(output, "output");
            return issue(c, b, [&] { return c.reduce_scatter(in, out, o); });
          },
          "input"_a, "output"_a, "op"_a = "sum",
          "input has size * output.size elements; rank r receives block r of the reduction.")
      .def(
          "all_gather",
          [](Communicator& c, nb::handle input, nb::handle output) {
            Buffers b("all_gather");
            const Buffer in = b.input(input, "input"), out = b.output(output, "output");
            return issue(c, b, [&] { return c.all_gather(in, out); });
          },
          "input"_a, "output"_a,
          "output has size * input.size elements; block r is rank r's input.")
      .def(
          "all_to_all",
          [](Communicator& c, nb::handle input, nb::handle output) {
            Buffers b("all_to_all");
            const Buffer in = b.input(input, "input"), out = b.output(output, "output");
            return issue(c, b, [&] { return c.all_to_all(in, out); });
          },
          "input"_a, "output"_a,
          "size equal blocks: block j of input goes to rank j, block i of output comes from rank "
          "i.")
      .def(
          "all_to_allv",
          [](Communicator& c, nb::handle input, std::vector<size_t> send_counts, nb::handle output,
             std::vector<size_t> recv_counts, std::optional<std::vector<size_t>> send_displs,
             std::optional<std::vector<size_t>> recv_displs) {
            Buffers b("all_to_allv");
            const Buffer in = b.input(input, "input"), out = b.output(output, "output");
            // Displacements default to packed blocks in rank order.
            auto sd = send_displs ? *send_displs : prefix_sums(send_counts);
            auto rd = recv_displs ? *recv_displs : prefix_sums(recv_counts);
            return issue(c, b,
                         [&] { return c.all_to_allv(in, send_counts, sd, out, recv_counts, rd); });
          },
          "input"_a, "send_counts"_a, "output"_a, "recv_counts"_a, "send_displs"_a = nb::none(),
          "recv_displs"_a = nb::none(),
          "all_to_all with per-rank counts (in elements); displacements default to the prefix "
          "sums of the counts.")
      .def(
          "broadcast",
          [](Communicator& c, nb::handle buffer, int root) {
            Buffers b("broadcast");
            const Buffer io = b.output(buffer, "buffer");
            return issue(c, b, [&] { return c.broadcast(io, root); });
          },
          "buffer"_a, "root"_a = 0, "Copies root's buffer into every rank's buffer.")
      .def(
          "reduce",
          [](Communicator& c, nb::handle input, nb::handle output, const OpArg& op, int root) {
            const ReduceOp o = parse_op(op);
            Buffers b("reduce");
            const bool is_root = c.rank() == root;
            if (is_root && output.is_none()) {
              const Buffer io = b.output(input, "input (in place)");
              return issue(c, b, [&] { return c.reduce(io, io, o, root); });
            }
            const Buffer in = b.input(input, "input");
            // Ignored on the other ranks: not looked at, so anything there (None) is fine.
            const Buffer out = is_root ? root_buffer(c, "reduce", root, in, o,
                                                     [&] { return b.output(output, "output"); })
                                       : Buffer{};
            return issue(c, b, [&] { return c.reduce(in, out, o, root); });
          },
          "input"_a, "output"_a.none() = nb::none(), "op"_a = "sum", "root"_a = 0,
          "Reduction delivered to root only (into input when output is None there); output is "
          "ignored, and may be None, on other ranks.")
      .def(
          "gather",
          [](Communicator& c, nb::handle input, nb::handle output, int root) {
            Buffers b("gather");
            const Buffer in = b.input(input, "input");
            // Ignored on the other ranks: not looked at. None on the root is an empty buffer, which
            // the library refuses there and tells the other ranks of, so they fail at once too.
            Buffer out{nullptr, 0, in.dtype, in.memory};
            if (c.rank() == root && !output.is_none()) {
              out = root_buffer(c, "gather", root, in, ReduceOp::sum,
                                [&] { return b.output(output, "output"); });
            }
            return issue(c, b, [&] { return c.gather(in, out, root); });
          },
          "input"_a, "output"_a.none() = nb::none(), "root"_a = 0,
          "root receives size * input.size elements in rank order; output may be None elsewhere.")
      .def(
          "scatter",
          [](Communicator& c, nb::handle input, nb::handle output, int root) {
            Buffers b("scatter");
            const Buffer out = b.output(output, "output");
            // As gather's output: ignored elsewhere, and None on the root refused by the library.
            Buffer in{nullptr, 0, out.dtype, out.memory};
            if (c.rank() == root && !input.is_none()) {
              in = root_buffer(c, "scatter", root, out, ReduceOp::sum,
                               [&] { return b.input(input, "input"); });
            }
            return issue(c, b, [&] { return c.scatter(in, out, root); });
          },
          "input"_a.none(), "output"_a, "root"_a = 0,
          "root sends block r of input (size * output.size elements) to rank r; input may be None "
          "elsewhere.")
      .def(
          "send",
          [](Communicator& c, nb::handle buffer, int peer, uint32_t tag) {
            Buffers b("send");
            const Buffer in = b.input(buffer, "buffer");
            return issue(c, b, [&] { return c.send(in, peer, tag); });
          },
          "buffer"_a, "peer"_a, "tag"_a = 0,
          "Sends to peer; messages of one pair and tag match in issue order.")
      .def(
          "recv",
          [](Communicator& c, nb::handle buffer, int peer, uint32_t tag) {
            Buffers b("recv");
            const Buffer out = b.output(buffer, "buffer");
            return issue(c, b, [&] { return c.recv(out, peer, tag); });
          },
          "buffer"_a, "peer"_a, "tag"_a = 0,
          "Receives from peer (or strata.ANY_SOURCE: Work.source says which) into buffer.")
      .def(
          "barrier",
          [](Communicator& c) {
            Buffers b("barrier");
            return issue(c, b, [&] { return c.barrier(); });
          },
          "Completes when every rank has entered it.");
}

}  // namespace strata::py
