// The rooted collectives (broadcast, reduce, gather, scatter): the checks every rank makes, then
// those only the root can make, whose failure the others are told of instead of waiting for it.
#include <string>

#include "runtime/argument_checks.hpp"
#include "runtime/calls.hpp"
#include "runtime/communicator_impl.hpp"
#include "runtime/entry_checks.hpp"
#include "strata/communicator.hpp"

namespace strata {

using runtime::checked;
using runtime::place;

namespace {

// Runs `checks`, those only this rank can make (a root's buffers). A failure is told to every
// rank before it is thrown here, so that the others fail naming this rank instead of waiting.
template <typename Checks>
void root_checks(Communicator::Impl& c, const char* op, int root, Buffer data, int reduce,
                 Checks checks) {
  try {
    checks();
  } catch (const Error& e) {
    c.refuse(op, root, data, reduce, e);
    throw;
  }
}

}  // namespace

Work Communicator::broadcast(Buffer inout, int root) { return broadcast(inout, inout, root); }

Work Communicator::broadcast(Buffer in, Buffer out, int root) {
  auto& c = checked(impl_);
  runtime::Checker check = c.checker("broadcast", root);
  check.peer(root, c.size, "root");
  check.buffer(out, "output");
  const bool is_root = c.rank == root;
  runtime::Placement placed = place(check, has_stream_, stream_, Buffer{}, out);
  if (is_root) {
    root_checks(c, "broadcast", root, out, -1, [&] {
      check.buffer(in, "input");
      check.same_dtype(in, out);
      check.count(out, in.count, "output", "broadcast output has the input's count");
      check.no_overlap(in, out, in.data == out.data);
      placed = place(check, has_stream_, stream_, in, out);
    });
  }
  return runtime::call(c, algo::Collective::broadcast,
                       {.in = is_root ? in.data : out.data,
                        .out = out.data,
                        .count = out.count,
                        .dtype = out.dtype,
                        .root = root},
                       placed);
}

Work Communicator::reduce(Buffer in, Buffer out, ReduceOp op, int root) {
  auto& c = checked(impl_);
  runtime::Checker check = c.checker("reduce", root);
  check.peer(root, c.size, "root");
  check.buffer(in, "input");
  check.reduce_op(in.dtype, op);
  const bool is_root = c.rank == root;
  runtime::Placement placed = place(check, has_stream_, stream_, in);
  if (is_root) {
    root_checks(c, "reduce", root, in, int(op), [&] {
      check.buffer(out, "output");
      check.same_dtype(in, out);
      check.count(out, in.count, "output", "reduce output has the input's count");
      check.no_overlap(in, out, in.data == out.data);
      placed = place(check, has_stream_, stream_, in, out);
    });
  }
  return runtime::call(c, algo::Collective::reduce,
                       {.in = in.data,
                        .out = out.data,
                        .count = in.count,
                        .dtype = in.dtype,
                        .op = op,
                        .root = root},
                       placed);
}

Work Communicator::gather(Buffer in, Buffer out, int root) {
  auto& c = checked(impl_);
  runtime::Checker check = c.checker("gather", root);
  check.peer(root, c.size, "root");
  check.buffer(in, "input");
  const bool is_root = c.rank == root;
  runtime::Placement placed = place(check, has_stream_, stream_, in);
  if (is_root) {
    root_checks(c, "gather", root, in, -1, [&] {
      check.buffer(out, "output");
      check.same_dtype(in, out);
      check.count(out, check.times(in, c.size, "input"), "output",
                  "gather output at root is size() * input count");
      check.no_overlap(in, out, in.data == runtime::element_at(out, in.count * root));
      placed = place(check, has_stream_, stream_, in, out);
    });
  }
  return runtime::call(
      c, algo::Collective::gather,
      {.in = in.data, .out = out.data, .count = in.count, .dtype = in.dtype, .root = root}, placed);
}

Work Communicator::scatter(Buffer in, Buffer out, int root) {
  auto& c = checked(impl_);
  runtime::Checker check = c.checker("scatter", root);
  check.peer(root, c.size, "root");
  check.buffer(out, "output");
  const bool is_root = c.rank == root;
  runtime::Placement placed = place(check, has_stream_, stream_, Buffer{}, out);
  if (is_root) {
    root_checks(c, "scatter", root, out, -1, [&] {
      check.buffer(in, "input");
      check.same_dtype(in, out);
      check.count(in, check.times(out, c.size, "output"), "input",
                  "scatter input at root is size() * output count");
      check.no_overlap(in, out, out.data == runtime::element_at(in, out.count * root));
      placed = place(check, has_stream_, stream_, in, out);
    });
  }
  return runtime::call(
      c, algo::Collective::scatter,
      {.in = in.data, .out = out.data, .count = out.count, .dtype = out.dtype, .root = root},
      placed);
}

void Communicator::refuse_root_call(std::string_view collective, int root, Buffer data, ReduceOp op,
                                    const std::string& why) {
  auto& c = checked(impl_);
  const char* name = nullptr;
  for (const char* rooted : {"broadcast", "reduce", "gather", "scatter"}) {
    if (collective == rooted) name = rooted;
  }
  if (!name) {
    std::string what(collective);
    what += " is not a rooted collective (broadcast, reduce, gather, scatter)";
    c.checker("refuse_root_call").fail(what);
  }
  runtime::Checker check = c.checker(name, root);
  check.peer(root, c.size, "root");
  if (c.rank != root) check.fail("refuse_root_call on a rank that is not the root");
  check.buffer(data, "data");
  const bool reduces = name == std::string_view("reduce");
  if (reduces) check.reduce_op(data.dtype, op);
  root_checks(c, name, root, data, reduces ? int(op) : -1, [&] { check.fail(why); });
  __builtin_unreachable();  // root_checks rethrows what check.fail() threw
}

}  // namespace strata
