#include "bootstrap/claim_conflict.hpp"

#include "bootstrap/rank_claim.hpp"

namespace strata::bootstrap {

void ClaimConflict::counted(const std::string& key, int64_t value) {
  const std::string tag = kClaimedTwice;
  const size_t at = key.rfind(tag);
  if (value != 1 || at == std::string::npos || (at > 0 && key[at - 1] != '/')) return;
  const std::string group = at == 0 ? "" : key.substr(0, at - 1);
  const std::string why =
      "rank " + key.substr(at + tag.size()) + (group.empty() ? "" : " of group " + group) +
      " is claimed by two processes: two jobs on " + server_ +
      " with one job token (give each its own MASTER_PORT, or STRATA_JOB_TOKEN), or RANK set "
      "twice?";
  std::function<void(const std::string&)> f;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!why_.empty()) return;
    why_ = why;
    f = handler_;
  }
  if (f) f(why);
}

std::string ClaimConflict::on_conflict(std::function<void(const std::string&)> f) {
  std::lock_guard<std::mutex> lock(mu_);
  if (why_.empty()) handler_ = std::move(f);
  return why_;
}

}  // namespace strata::bootstrap
