// What every public Communicator call does first (runtime/communicator.cpp,
// runtime/rooted.cpp and runtime/point_to_point.cpp): find the communicator's state, and where the
// call's buffers live.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <source_location>

#include "runtime/argument_checks.hpp"
#include "runtime/communicator_impl.hpp"
#include "runtime/device_path.hpp"

namespace strata::runtime {

/// `impl`, or a clear error for an empty Communicator (default-constructed, or split with a
/// negative color) naming the method called (`from`: where the call was made).
Communicator::Impl& checked(const std::shared_ptr<Communicator::Impl>& impl,
                            std::source_location from = std::source_location::current());

/// Where a call's buffers live: one kind for the whole call (`check` fails a call that mixes
/// host and CUDA memory). A buffer of 0 elements (a non-root's ignored one) does not count.
Placement place(const Checker& check, bool has_stream, void* stream, Buffer a, Buffer b = {});

/// The address of element `elements` of `b` (for the in-place checks of blocked collectives).
inline const uint8_t* element_at(const Buffer& b, size_t elements) {
  return static_cast<const uint8_t*>(b.data) + elements * dtype_size(b.dtype);
}

}  // namespace strata::runtime
