// The transport of a group of one rank (solo.hpp), made without showing its class to the runtime.
#pragma once

#include <memory>

#include "transport/transport.hpp"

namespace strata::solo {

/// The transport of a group of one rank: no network, messages to itself.
std::unique_ptr<transport::Transport> make_transport();

}  // namespace strata::solo
