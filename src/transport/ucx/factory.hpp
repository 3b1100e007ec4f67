// The UCX transport, made without showing UCX's headers to its user (the runtime), and the
// clean-up of what a dead rank's UCX left behind (stale_files.hpp).
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "strata/store.hpp"
#include "transport/transport.hpp"
#include "transport/ucx/stale_files.hpp"

namespace strata::ucx {

/// Creates a UCX worker and connects to all `size` ranks through `store` (collective); see
/// Worker's constructor (worker.hpp) for `network_watched` and `one_node`.
std::unique_ptr<transport::Transport> make_transport(Store& store, int rank, int size,
                                                     const std::vector<bool>& network_watched,
                                                     bool one_node, const ErrorContext& where,
                                                     std::chrono::milliseconds timeout);

/// After a failure Strata has reported, UCX's own lines about it (an endpoint timing out in a
/// flush, messages nobody took when a worker closes, thousands of them from a hung peer) only
/// repeat it: from then on this process's UCX logs only what is fatal, unless UCX_LOG_LEVEL is set.
void quiet_after_failure();

}  // namespace strata::ucx
