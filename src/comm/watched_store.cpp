#include "comm/watched_store.hpp"

#include <algorithm>

#include "strata/error.hpp"

namespace strata::comm {
namespace {

// Short enough that a death is noticed quickly, long enough that a slice rarely ends a wait that
// was about to succeed (a wait that outlasts a slice reconnects to the TCP store).
constexpr auto kSlice = std::chrono::milliseconds(250);

}  // namespace

WatchedStore::WatchedStore(std::shared_ptr<Store> base, std::function<bool()> failed)
    : base_(std::move(base)), failed_(std::move(failed)) {}

void WatchedStore::in_slices(std::chrono::milliseconds timeout,
                             const std::function<void(std::chrono::milliseconds)>& call) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (failed_()) {
      throw Error(ErrorCode::aborted, {.op = "store.get"},
                  "the enclosing group failed while its node and rail groups were set up");
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    try {
      call(std::clamp(left, std::chrono::milliseconds(1), kSlice));
      return;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::timeout || left <= kSlice) throw;
    }
  }
}

void WatchedStore::set(const std::string& key, const Bytes& value) { base_->set(key, value); }

Bytes WatchedStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  Bytes value;
  in_slices(timeout, [&](std::chrono::milliseconds slice) { value = base_->get(key, slice); });
  return value;
}

int64_t WatchedStore::add(const std::string& key, int64_t delta) { return base_->add(key, delta); }

void WatchedStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  in_slices(timeout, [&](std::chrono::milliseconds slice) { base_->wait(keys, slice); });
}

}  // namespace strata::comm
