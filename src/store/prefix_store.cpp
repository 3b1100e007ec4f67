// A namespace inside another store: every key gets "<prefix>/" in front, so communicators that
// share the job's store cannot see or clobber each other's keys.
#include "strata/error.hpp"
#include "strata/store.hpp"

namespace strata {

PrefixStore::PrefixStore(std::shared_ptr<Store> base, std::string prefix)
    : base_(std::move(base)), prefix_(std::move(prefix) + "/") {
  if (!base_) {
    ErrorContext where;
    where.op = "store.prefix";
    throw Error(ErrorCode::invalid_argument, where, "PrefixStore '" + prefix_ + "' has no base");
  }
}

void PrefixStore::set(const std::string& key, const Bytes& value) {
  base_->set(prefix_ + key, value);
}

Bytes PrefixStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  return base_->get(prefix_ + key, timeout);
}

int64_t PrefixStore::add(const std::string& key, int64_t delta) {
  return base_->add(prefix_ + key, delta);
}

void PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const auto& k : keys) full.push_back(prefix_ + k);
  base_->wait(full, timeout);
}

bool PrefixStore::set_when_gone(const std::string& key, const Bytes& value) {
  return base_->set_when_gone(prefix_ + key, value);
}

}  // namespace strata
