#include "runtime/setup_store.hpp"

#include "bootstrap/rank_claim.hpp"

namespace strata::runtime {

void SetupStore::set(const std::string& key, const Bytes& value) {
  base_->set(key, value);
  std::lock_guard<std::mutex> lock(mu_);
  if (recording_ && key.rfind(bootstrap::kClaims, 0) != 0) set_.push_back(key);
}

void SetupStore::erase_setup_records() {
  std::vector<std::string> keys;
  {
    std::lock_guard<std::mutex> lock(mu_);
    recording_ = false;
    keys.swap(set_);
  }
  for (const auto& k : keys) base_->erase(k);
}

}  // namespace strata::runtime
