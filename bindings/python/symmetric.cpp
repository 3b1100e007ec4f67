// Communicator.alloc_symmetric: a numpy array over a strata::SymmetricBuffer, which the array
// owns (a capsule), so the memory lives as long as any view of it.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "bindings.hpp"
#include "strata/communicator.hpp"

namespace strata::py {

void register_symmetric(nb::module_&) {
  nb::handle cls = nb::type<Communicator>();
  auto alloc = [](Communicator& c, size_t nbytes) {
    SymmetricBuffer b;
    {
      nb::gil_scoped_release unlocked;  // collective
      b = c.alloc_symmetric(nbytes);
    }
    auto* held = new SymmetricBuffer(std::move(b));
    nb::capsule owner(held, [](void* p) noexcept { delete static_cast<SymmetricBuffer*>(p); });
    return nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>(held->data(), {nbytes}, owner);
  };
  nb::setattr(
      cls, "alloc_symmetric",
      nb::cpp_function(
          alloc, nb::scope(cls), nb::name("alloc_symmetric"), nb::is_method(), nb::arg("nbytes"),
          "Collective: `nbytes` of zeroed memory as a numpy uint8 array (view it as any dtype), "
          "mapped by the other ranks when the group shares one node: all_gather, all_to_all and "
          "all_to_allv read an input lying in it from its owner's memory, one copy instead of "
          "two. Every rank passes the same size; drop it on every rank after its last call."));
}

}  // namespace strata::py
