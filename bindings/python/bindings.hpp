// Shared by the files of the _strata extension: turning Python buffers into strata::Buffer views
// (buffers.cpp), the Work wrapper that keeps them alive, and the registration functions.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <string>
#include <string_view>
#include <vector>

#include "interrupt.hpp"
#include "strata/communicator.hpp"
#include "strata/error.hpp"
#include "strata/types.hpp"
#include "strata/work.hpp"

namespace strata::py {

namespace nb = nanobind;

/// A buffer kept alive by whoever holds it: the DLPack / buffer-protocol export of the caller's
/// object (which holds a reference to that object), read-only or writable alike.
using Held = nb::ndarray<nb::ro>;

/// Collects the buffers of one call: each one is checked and viewed in place (never copied), and
/// the exports are kept so the Work can hold them until the operation completes.
class Buffers {
 public:
  /// `op` names the call in error messages ("all_reduce").
  explicit Buffers(const char* op) : op_(op) {}
  /// A buffer the operation reads. Raises TypeError when `obj` is not a contiguous CPU array of a
  /// supported dtype.
  Buffer input(nb::handle obj, const char* what);
  /// A buffer the operation writes: as input(), and also TypeError when it is read-only.
  Buffer output(nb::handle obj, const char* what);
  std::vector<Held> take() { return std::move(held_); }

 private:
  Buffer view(const Held& a, nb::handle obj, const char* what);
  const char* op_;
  std::vector<Held> held_;
};

/// An operator given as strata.ReduceOp or as its name ("sum", "max", ...).
/// A reduction as Python gives it: a strata.ReduceOp or its name. Anything else, a number or a
/// bool included (whose values would be some enum's), is refused with a TypeError.
using OpArg = nb::handle;
ReduceOp parse_op(nb::handle op);

/// What a collective returns: the C++ Work, the communicator (so the group outlives the
/// operation) and the Python buffers (so the memory being written stays valid).
struct PyWork {
  Work work;
  Communicator comm;
  std::vector<Held> held;

  PyWork(Work w, Communicator c, std::vector<Held> h)
      : work(std::move(w)), comm(std::move(c)), held(std::move(h)) {}
  PyWork(PyWork&&) = default;
  PyWork& operator=(PyWork&&) = default;
  /// Parks the buffers of an unfinished operation (see park_unfinished) instead of freeing them.
  ~PyWork();
};

/// Drops the parked buffers of operations that have finished. Called on every new operation.
void sweep_parked();

/// Runs `f` with the GIL released and `ctrl_c` armed: the call raises Python's pending
/// KeyboardInterrupt instead of the strata.Error a Ctrl-C caused. Call with the GIL held.
template <typename F>
auto guarded(const InterruptibleWait& ctrl_c, F&& f) {
  try {
    nb::gil_scoped_release unlocked;  // other Python threads run while this one waits
    return f();
  } catch (const Error&) {
    // KeyboardInterrupt is raised on the main thread only: elsewhere the abort's error stands.
    if (ctrl_c.interrupted() && PyErr_CheckSignals() != 0) throw nb::python_error();
    throw;
  }
}

/// Runs `f`, a call that blocks on `comm` (a wait, or a collective such as split), armed for
/// Ctrl-C (InterruptibleWait): a Ctrl-C aborts `comm` and the call raises KeyboardInterrupt.
template <typename F>
auto interruptible(const Communicator& comm, F&& f) {
  // Armed first: f() may run a queued collective on this thread to its end, the very wait a
  // Ctrl-C must end.
  InterruptibleWait ctrl_c(comm);
  return guarded(ctrl_c, std::forward<F>(f));
}

/// Runs `f(options)`, a call that sets up a group with no group of its own to abort (from_env,
/// shrink): a Ctrl-C cancels the setup through `options.cancelled`, and the call raises
/// KeyboardInterrupt.
template <typename F>
auto cancellable(CommOptions options, F&& f) {
  InterruptibleWait ctrl_c;
  options.cancelled = [&ctrl_c] { return ctrl_c.interrupted(); };
  return guarded(ctrl_c, [&] { return f(options); });
}

// Registration of each part of the module.
void register_errors(nb::module_& m);
void register_communicator(nb::module_& m);
/// Communicator's collectives and send/recv (after register_communicator).
void register_collectives(nb::module_& m);
void register_topology(nb::module_& m);
void register_mesh(nb::module_& m);
/// Communicator.alloc_symmetric and Communicator.send_recv (after register_communicator).
void register_symmetric(nb::module_& m);
void register_point_to_point(nb::module_& m);
/// JobTopology::gather(comm) as a dict (collective over comm).
nb::dict gather_job_topology(Communicator& comm);

}  // namespace strata::py
