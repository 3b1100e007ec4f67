#include "ctrl_c.hpp"

#include <torch/csrc/utils/pybind.h>

#include "bindings/python/interrupt.hpp"

namespace strata::torch_backend {
namespace {
const py::InterruptApi* g_api = nullptr;  // set once at import, read by every wait
}

void CtrlC::load() {
  g_api = static_cast<const py::InterruptApi*>(PyCapsule_Import(py::kInterruptCapsule, 0));
  if (!g_api) PyErr_Clear();
}

CtrlC::CtrlC(const Communicator& group) {
  if (g_api && group) guard_ = g_api->begin(group);
}

CtrlC::~CtrlC() {
  if (guard_) g_api->end(guard_);
}

void CtrlC::raise_if_interrupted() const {
  if (!guard_ || !g_api->interrupted(guard_)) return;
  pybind11::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
}

}  // namespace strata::torch_backend
