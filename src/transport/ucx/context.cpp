#include "transport/ucx/context.hpp"

#include <mutex>

#include "base/log.hpp"
#include "strata/error.hpp"

namespace strata::ucx {
namespace {

[[noreturn]] void fail_setup(const std::string& what) {
  throw Error(ErrorCode::transport, {.op = "ucx.init"}, what);
}

std::string status_text(ucs_status_t s) { return ucs_status_string(s); }

}  // namespace

std::shared_ptr<Context> Context::get(const std::vector<Setting>& settings) {
  static std::mutex mu;
  static std::weak_ptr<Context> current;
  std::lock_guard<std::mutex> lock(mu);
  auto c = current.lock();
  if (!c) {
    c = std::shared_ptr<Context>(new Context(settings));
    current = c;
  }
  return c;
}

Context::Context(const std::vector<Setting>& settings) {
  ucp_config_t* cfg = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &cfg);
  if (s != UCS_OK) fail_setup("ucp_config_read: " + status_text(s));
  for (const Setting& set : settings) {
    s = ucp_config_modify(cfg, set.name.c_str(), set.value.c_str());
    if (s != UCS_OK) {
      ucp_config_release(cfg);
      fail_setup("UCX_" + set.name + "=" + set.value + ": " + status_text(s));
    }
    STRATA_LOG(INFO, "INIT") << "UCX_" << set.name << "=" << set.value
                             << " (transport/ucx/scope.hpp; set it to choose otherwise)";
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 1;  // workers of different communicators live on different threads
  s = ucp_init(&params, cfg, &ctx_);
  ucp_config_release(cfg);
  if (s != UCS_OK) fail_setup("ucp_init: " + status_text(s));
}

Context::~Context() {
  if (ctx_) ucp_cleanup(ctx_);
}

}  // namespace strata::ucx
