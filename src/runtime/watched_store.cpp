#include "runtime/watched_store.hpp"

#include "bootstrap/await_rank.hpp"
#include "strata/error.hpp"

namespace strata::runtime {

WatchedStore::WatchedStore(std::shared_ptr<Store> base, std::function<bool()> failed,
                           std::string why)
    : base_(std::move(base)), failed_(std::move(failed)), why_(std::move(why)) {}

void WatchedStore::watched(std::chrono::milliseconds timeout,
                           const std::function<void(std::chrono::milliseconds)>& call) {
  const auto failed = [this] { return watching_.load() && failed_(); };
  if (failed() || !bootstrap::in_slices(timeout, call, failed)) {
    throw Error(ErrorCode::aborted, {.op = "store.get"}, why_);
  }
}

void WatchedStore::set(const std::string& key, const Bytes& value) { base_->set(key, value); }

Bytes WatchedStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  Bytes value;
  watched(timeout, [&](std::chrono::milliseconds slice) { value = base_->get(key, slice); });
  return value;
}

int64_t WatchedStore::add(const std::string& key, int64_t delta) { return base_->add(key, delta); }

void WatchedStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  watched(timeout, [&](std::chrono::milliseconds slice) { base_->wait(keys, slice); });
}

bool WatchedStore::set_when_gone(const std::string& key, const Bytes& value) {
  return base_->set_when_gone(key, value);
}

std::shared_ptr<WatchedStore> watch_for_cancel(std::shared_ptr<Store> base,
                                               const CommOptions& options) {
  if (!options.cancelled) return nullptr;
  return std::make_shared<WatchedStore>(
      std::move(base), options.cancelled,
      "cancelled while the group was set up (CommOptions::cancelled)");
}

}  // namespace strata::runtime
