// _strata_torch: the Python face of ProcessGroupStrata. strata/torch.py registers create() with
// torch.distributed under the name "strata". Built with the pybind11 that ships inside the torch
// wheel, so c10d.Store and c10d.Backend are the very types torch registered.
#include <torch/csrc/utils/pybind.h>

#include "call_stream.hpp"
#include "ctrl_c.hpp"
#include "process_group.hpp"

namespace {

namespace py = pybind11;
using strata::torch_backend::ProcessGroupStrata;

}  // namespace

PYBIND11_MODULE(_strata_torch, m) {
  m.doc() = "The torch.distributed backend 'strata' (import strata.torch to register it)";
  py::module_::import("torch.distributed");  // c10d's Store and Backend types, registered first
  strata::torch_backend::CtrlC::load();      // strata._strata is imported already (strata/torch.py)
  py::class_<ProcessGroupStrata, c10d::Backend, c10::intrusive_ptr<ProcessGroupStrata>>(
      m, "ProcessGroupStrata");
  m.def(
      "create",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, int64_t timeout_ms,
         const std::string& group_name) {
        return c10::make_intrusive<ProcessGroupStrata>(
            store, rank, size, std::chrono::milliseconds(timeout_ms), group_name);
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_ms"),
      py::arg("group_name"), py::call_guard<py::gil_scoped_release>(),
      "Joins the group of `size` ranks meeting through `store` (collective).");
  m.attr("torch_version") = TORCH_STRATA_BUILT_AGAINST;
  // Whether CUDA tensors go by Strata's device path (the library was built with it).
  m.attr("cuda") = strata::torch_backend::cuda_tensors_supported();
}
