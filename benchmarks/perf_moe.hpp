// strata-perf moe: times one mixture-of-experts layer's dispatch and combine
// (perf_moe_options.hpp).
#pragma once

namespace perf {

/// Runs `strata-perf moe ARGS` (argv[1] is "moe"); returns the exit code.
int run_moe(int argc, char** argv);

}  // namespace perf
