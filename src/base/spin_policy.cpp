#include "base/spin_policy.hpp"

#include "base/config.hpp"

namespace strata {
namespace {
thread_local bool t_inline_caller = false;
thread_local const std::atomic<int>* t_blocked = nullptr;
}  // namespace

void set_inline_caller(bool v) { t_inline_caller = v; }
void set_blocked_callers(const std::atomic<int>* count) { t_blocked = count; }

std::chrono::microseconds spin_budget(bool oversubscribed) {
  if (oversubscribed) return std::chrono::microseconds::zero();
  const bool caller_waits = t_inline_caller || (t_blocked && t_blocked->load() > 0);
  return caller_waits ? config().spin : std::chrono::microseconds(50);
}

}  // namespace strata
