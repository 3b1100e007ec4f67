// Communicator.send_recv: sends and receives issued together (Communicator::send_recv), as
// torch's batch_isend_irecv; one Work per op, each holding its buffer.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <climits>
#include <cstdint>
#include <string>

#include "bindings.hpp"
#include "strata/communicator.hpp"

namespace strata::py {

namespace {

// The peer or tag of op `at`: any Python integer, numpy's included (through __index__, as send
// and broadcast take them), but not a bool; OverflowError outside [lo, hi].
long long integer(nb::handle v, const std::string& at, const char* what, long long lo,
                  long long hi) {
  PyObject* i = nb::isinstance<nb::bool_>(v) ? nullptr : PyNumber_Index(v.ptr());
  if (!i) {
    PyErr_Clear();
    throw nb::type_error((at + ": the " + what + " is not an int").c_str());
  }
  const nb::object owned = nb::steal(i);
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(i, &overflow);
  if (overflow || x < lo || x > hi) {
    const std::string m = at + ": the " + what + " " + nb::repr(owned).c_str() +
                          " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                          "]";
    PyErr_SetString(PyExc_OverflowError, m.c_str());
    throw nb::python_error();
  }
  return x;
}

// Op i as ("send" | "recv", buffer, peer[, tag]); TypeError or ValueError naming i otherwise.
PeerOp parse(nb::handle item, size_t i, Buffers& b) {
  const std::string at = "strata.send_recv: op " + std::to_string(i);
  if (!nb::isinstance<nb::tuple>(item))
    throw nb::type_error(
        (at + " is not a tuple (\"send\" or \"recv\", buffer, peer[, tag])").c_str());
  const nb::tuple t = nb::borrow<nb::tuple>(item);
  if (t.size() != 3 && t.size() != 4)
    throw nb::type_error((at + " has " + std::to_string(t.size()) +
                          " items, not 3 or 4 (\"send\" or \"recv\", buffer, peer[, tag])")
                             .c_str());
  if (!nb::isinstance<nb::str>(t[0]))
    throw nb::type_error((at + ": the kind is not a string (\"send\" or \"recv\")").c_str());
  const std::string kind = nb::cast<std::string>(t[0]);
  if (kind != "send" && kind != "recv")
    throw nb::value_error((at + ": kind '" + kind + "' is not \"send\" or \"recv\"").c_str());
  PeerOp op;
  op.kind = kind == "send" ? PeerOp::send : PeerOp::recv;
  // The peer's range is the library's to check (ANY_SOURCE included); here only that it fits.
  op.peer = int(integer(t[2], at, "peer", INT_MIN, INT_MAX));
  op.tag = t.size() == 4 ? uint32_t(integer(t[3], at, "tag", 0, UINT32_MAX)) : 0;
  op.buffer = kind == "send" ? b.input(t[1], "buffer") : b.output(t[1], "buffer");
  return op;
}

}  // namespace

void register_point_to_point(nb::module_&) {
  nb::handle cls = nb::type<Communicator>();
  auto send_recv = [](Communicator& c, nb::sequence ops) {
    sweep_parked();
    std::vector<PeerOp> peer_ops;
    std::vector<Buffers> held;
    held.reserve(nb::len(ops));
    size_t i = 0;
    for (nb::handle item : ops) {
      held.emplace_back("send_recv");
      peer_ops.push_back(parse(item, i++, held.back()));
    }
    std::vector<Work> works;
    {
      nb::gil_scoped_release unlocked;
      works = c.send_recv(peer_ops);
    }
    std::vector<PyWork> out;
    for (size_t k = 0; k < works.size(); ++k) {
      out.emplace_back(std::move(works[k]), c, held[k].take());
    }
    return out;
  };
  nb::setattr(
      cls, "send_recv",
      nb::cpp_function(
          send_recv, nb::scope(cls), nb::name("send_recv"), nb::is_method(), nb::arg("ops"),
          "Sends and receives issued together, as torch's batch_isend_irecv: each op is "
          "(\"send\" or \"recv\", buffer, peer[, tag]). On CUDA buffers that NCCL moves they go "
          "in one NCCL group, so a ring where every rank sends before it receives cannot "
          "deadlock; host ones progress together anyway. Every op is checked before any is "
          "issued. Returns one Work per op, in order."));
}

}  // namespace strata::py
