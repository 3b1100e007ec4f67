// --compare mpi: Open MPI's own collective on the same buffers, in the same process and run.
#pragma once

#include <optional>

#include "perf_case.hpp"

namespace perf {

/// Average microseconds per call (max over ranks) of the MPI equivalent of `c` (out-of-place),
/// or nullopt when MPI has no equivalent (f16/bf16 dtypes, avg). `fresh`: the input rewritten
/// before every call (--fresh), timed with it.
std::optional<double> time_mpi(const Case& c, strata::Buffer in, strata::Buffer out, int warmup,
                               int iters, bool fresh);

}  // namespace perf
