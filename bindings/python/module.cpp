// The _strata extension: Communicator (its life: from_env, split, shrink, abort), Work, ReduceOp,
// and the registration of the other parts (collectives, errors, mesh, topology). The Work holds
// the Python buffers until the operation has completed, and wait() releases the GIL.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "bindings.hpp"
#include "interrupt.hpp"
#include "strata/error.hpp"
#include "strata/version.hpp"

namespace strata::py {
namespace {

using namespace nb::literals;

// A dropped Work whose operation had not finished yet: its buffers (and group) are kept here until
// it has, since the transport may still write into them. Heap-allocated and never freed: it must
// not be destroyed after the interpreter (its ndarrays release Python objects).
struct Parked {
  Work work;
  Communicator comm;
  std::vector<Held> held;
};
std::vector<Parked>* const g_parked = new std::vector<Parked>();

bool finished(const Work& w) {
  try {
    return w.test();
  } catch (...) {
    return true;  // failed: nothing writes into the buffers any more
  }
}

std::chrono::milliseconds to_ms(double seconds, const char* what) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) {
    throw nb::value_error(
        (std::string("strata: ") + what + " must be a finite number of seconds >= 0").c_str());
  }
  // Capped at a year: a larger deadline means "forever" and would overflow the clock.
  return std::chrono::milliseconds(int64_t(std::ceil(std::min(seconds, 3.15e7) * 1000)));
}

// The options of `op` (from_env, split, shrink). A timeout of 0 would be CommOptions' "unset" (the
// default, or the parent's), while Work.wait(timeout=0) polls: so only a positive one is taken.
CommOptions options(const char* op, const std::optional<std::string>& name,
                    std::optional<double> timeout) {
  CommOptions o;
  if (name) o.name = *name;
  if (timeout && !(*timeout > 0 && std::isfinite(*timeout))) {
    throw nb::value_error(
        ("strata." + std::string(op) + ": timeout must be a finite number of seconds > 0, not " +
         std::string(nb::repr(nb::float_(*timeout)).c_str()) + " (omit it for the default)")
            .c_str());
  }
  if (timeout) o.timeout = to_ms(*timeout, "timeout");
  return o;
}

}  // namespace

PyWork::~PyWork() {
  if (!finished(work)) g_parked->push_back({std::move(work), std::move(comm), std::move(held)});
}

void sweep_parked() {
  std::erase_if(*g_parked, [](const Parked& p) { return finished(p.work); });
}

void register_communicator(nb::module_& m) {
  nb::enum_<ReduceOp>(m, "ReduceOp", "Reduction operator; every operation also takes its name.")
      .value("sum", ReduceOp::sum)
      .value("prod", ReduceOp::prod)
      .value("max", ReduceOp::max)
      .value("min", ReduceOp::min)
      .value("avg", ReduceOp::avg, "sum / group size (integers truncate)")
      .value("band", ReduceOp::band, "bitwise and (integers, bool)")
      .value("bor", ReduceOp::bor, "bitwise or (integers, bool)")
      .value("bxor", ReduceOp::bxor, "bitwise xor (integers, bool)");

  nb::class_<PyWork>(m, "Work", "Handle of an operation in flight; holds its buffers until done.")
      .def(
          "wait",
          [](const PyWork& w, std::optional<double> timeout) {
            const auto ms = timeout ? std::optional(to_ms(*timeout, "timeout")) : std::nullopt;
            interruptible(w.comm, [&] { ms ? w.work.wait(*ms) : w.work.wait(); });
          },
          "timeout"_a = nb::none(),
          "Blocks until the operation completes. Raises strata.Error if it failed. With "
          "`timeout` (seconds), also when that passes: the operation keeps running, and a later "
          "wait() may still succeed. Without, it waits while the communicator's operations "
          "complete; if none completes within the communicator's deadline (plus up to 5 s), "
          "the communicator is aborted and this raises. Ctrl-C (SIGINT, while Python's handler "
          "is the default one) aborts the communicators being waited on and raises "
          "KeyboardInterrupt; their peers fail naming this rank.")
      .def(
          "test",
          [](const PyWork& w) {
            nb::gil_scoped_release unlocked;
            return w.work.test();
          },
          "True when complete; raises strata.Error if the operation failed. Never waits for a "
          "rank that has not issued the collective yet, but may run on this thread (to its end, "
          "as wait() would) a queued collective that every rank of a group on one node has "
          "issued, when no other thread is running the queue.")
      .def_prop_ro(
          "elapsed_seconds", [](const PyWork& w) { return w.work.elapsed_seconds(); },
          "Seconds from the operation's start to its completion (0 until complete).")
      .def_prop_ro(
          "source", [](const PyWork& w) { return w.work.source(); },
          "The rank a completed recv received from (what ANY_SOURCE matched); -1 for "
          "other operations and before completion.");

  nb::class_<Communicator>(m, "Communicator",
                           "A group of ranks. Operations return a Work at once and complete in "
                           "issue order; buffers are used in place, never copied.")
      .def_static(
          "from_env",
          [](const std::string& name, std::optional<double> timeout) {
            return cancellable(options("from_env", name, timeout),
                               [](const CommOptions& o) { return Communicator::from_env(o); });
          },
          "name"_a = "world", "timeout"_a = nb::none(),
          "Joins the job of mpirun (OMPI_COMM_WORLD_*) or torchrun (RANK, WORLD_SIZE, MASTER_ADDR, "
          "...). Collective. `timeout`: deadline of every operation in seconds (default "
          "STRATA_TIMEOUT, 300 s). Ctrl-C while it waits for the store or a late rank raises "
          "KeyboardInterrupt (not inside mpirun's own start-up broadcast).")
      .def_prop_ro("rank", &Communicator::rank)
      .def_prop_ro("size", &Communicator::size)
      .def_prop_ro("name", &Communicator::name)
      .def("__repr__",
           [](const Communicator& c) {
             return "<strata.Communicator '" + c.name() + "' rank " + std::to_string(c.rank()) +
                    " of " + std::to_string(c.size()) + ">";
           })
      .def(
          "split",
          [](Communicator& c, int color, int key, std::optional<std::string> name,
             std::optional<double> timeout) -> std::optional<Communicator> {
            const CommOptions o = options("split", name, timeout);
            Communicator sub = interruptible(c, [&] { return c.split(color, key, o); });
            if (!sub) return std::nullopt;
            return sub;
          },
          "color"_a, "key"_a = 0, "name"_a = nb::none(), "timeout"_a = nb::none(),
          "Collective: ranks passing the same color form a communicator, ordered by (key, rank). "
          "Returns None on a rank passing a negative color. It keeps this communicator's "
          "deadline unless `timeout` (seconds) is given. Ctrl-C aborts this communicator and "
          "raises KeyboardInterrupt, as in Work.wait().")
      .def(
          "shrink",
          [](Communicator& c, const std::vector<int>& exclude, std::optional<std::string> name,
             std::optional<double> timeout) {
            return cancellable(options("shrink", name, timeout),
                               [&](const CommOptions& o) { return c.shrink(exclude, o); });
          },
          "exclude"_a, "name"_a = nb::none(), "timeout"_a = nb::none(),
          "A new communicator of this one's ranks less `exclude` (e.g. the dead ones), in their "
          "order, like ncclCommShrink: built through the store, so it works after this group "
          "failed. Collective over the survivors, who pass the same list. Raises strata.Error "
          "(code 'invalid_argument') for a rank out of range, repeated, or this rank's own. "
          "Keeps this communicator's deadline unless `timeout` (seconds) is given. Ctrl-C while "
          "it waits for a survivor raises KeyboardInterrupt.")
      .def(
          "abort",
          [](Communicator& c) {
            nb::gil_scoped_release unlocked;
            c.abort();
          },
          "Ends the group at once: pending and later operations fail with code 'aborted', and so "
          "do the other ranks', naming this rank (\"rank 0 aborted the communicator\").")
      .def("check_health", &Communicator::check_health,
           "Raises strata.Error with the failure this group has met (code 'peer_failure' or "
           "'aborted', naming the rank) after a look that costs no message: a peer's process on "
           "this machine gone, a failure notice, a broken connection. Returns None if there is "
           "none; never waits for other ranks.")
      .def("issue_from_this_thread", &Communicator::issue_from_this_thread,
           "Collectives are issued by one thread per communicator, the one that created it (so "
           "that every rank issues them in one order); another thread's are refused with code "
           "'invalid_argument'. Hands the issuing to the calling thread: call it on every rank at "
           "the same point, with nothing being issued meanwhile.")
      .def(
          "on_stream",
          [](const Communicator& c, nb::handle stream) {
            // A torch.cuda.Stream (or anything with .cuda_stream), or the handle as an int.
            nb::handle h = nb::hasattr(stream, "cuda_stream") ? stream.attr("cuda_stream") : stream;
            uintptr_t handle = 0;
            if (!nb::try_cast(h, handle, /*convert=*/false)) {
              throw nb::type_error(("strata.on_stream: stream must be a cudaStream_t as an int "
                                    "or an object with .cuda_stream (torch.cuda.Stream), not " +
                                    std::string(nb::type_name(stream.type()).c_str()))
                                       .c_str());
            }
            return c.on_stream(reinterpret_cast<void*>(handle));
          },
          "stream"_a,
          "This communicator with its calls on CUDA tensors ordered on `stream` (a "
          "torch.cuda.Stream, or a cudaStream_t as an int; 0 is the legacy default stream) "
          "instead of the communicator's own, as NCCL orders them (docs/device.md). Host calls "
          "are unaffected; the copy shares this group.")
      .def("flight_record", &Communicator::flight_record,
           "The last operations of this communicator as a table (for debugging hangs).")
      .def("job_topology", &gather_job_topology,
           "Collective: the whole job's topology as a dict with 'nodes', 'ranks' and "
           "'node_of_rank'.");
}

}  // namespace strata::py

NB_MODULE(_strata, m) {
  m.doc() = "Strata collective communication (the compiled part of the strata package).";
  m.attr("__version__") = STRATA_VERSION;
  m.attr("ANY_SOURCE") = strata::kAnySource;
  // For the torch backend's waits (interrupt.hpp): one SIGINT handler for both modules.
  m.attr("_interrupt_api") = nanobind::steal(
      PyCapsule_New(const_cast<strata::py::InterruptApi*>(&strata::py::interrupt_api()),
                    strata::py::kInterruptCapsule, nullptr));
  m.def("library_versions", &strata::library_versions,
        "[(name, version)] of Strata and the libraries it runs on, as loaded: Strata, MPI, UCX, "
        "hwloc, libxml2.");
  strata::py::register_errors(m);
  strata::py::register_communicator(m);
  strata::py::register_collectives(m);
  strata::py::register_symmetric(m);
  strata::py::register_point_to_point(m);
  strata::py::register_mesh(m);
  strata::py::register_topology(m);
}
