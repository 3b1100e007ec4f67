#include "transport/ucx/factory.hpp"

#include "transport/ucx/worker.hpp"

namespace strata::ucx {

std::unique_ptr<transport::Transport> make_transport(Store& store, int rank, int size,
                                                     const std::vector<bool>& network_watched,
                                                     bool one_node, const ErrorContext& where,
                                                     std::chrono::milliseconds timeout) {
  return std::make_unique<Worker>(store, rank, size, network_watched, one_node, where, timeout);
}

}  // namespace strata::ucx
