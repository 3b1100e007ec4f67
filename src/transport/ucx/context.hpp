// The process-wide UCX context every worker shares, read from UCX's configuration with Strata's
// scope (scope.hpp) applied once, when the first communicator of the process creates it.
#pragma once

#include <ucp/api/ucp.h>

#include <memory>
#include <vector>

#include "transport/ucx/scope.hpp"

namespace strata::ucx {

/// Process-wide UCX context, created on first use and shared by every worker.
class Context {
 public:
  /// The context; created with `settings` (scope.hpp) when none exists.
  static std::shared_ptr<Context> get(const std::vector<Setting>& settings);
  ~Context();
  ucp_context_h handle() const { return ctx_; }

 private:
  explicit Context(const std::vector<Setting>& settings);
  ucp_context_h ctx_ = nullptr;
};

}  // namespace strata::ucx
