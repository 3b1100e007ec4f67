#include "store_adapter.hpp"

#include <c10/util/Exception.h>

#include "strata/error.hpp"

namespace strata::torch_backend {
namespace {

// torch's store errors (DistStoreError on a timeout or a lost server) as Strata's, so the
// bootstrap reports them like its own store's: operation and key named.
template <typename F>
auto translated(const char* op, const std::string& key, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const c10::DistStoreError& e) {
    throw Error(ErrorCode::timeout, ErrorContext{.op = op},
                "key '" + key + "': " + e.what_without_backtrace());
  } catch (const c10::Error& e) {
    throw Error(ErrorCode::transport, ErrorContext{.op = op},
                "key '" + key + "': " + e.what_without_backtrace());
  }
}

}  // namespace

C10dStore::C10dStore(const c10::intrusive_ptr<c10d::Store>& store) : store_(store->clone()) {}

void C10dStore::set(const std::string& key, const Bytes& value) {
  translated("store.set", key, [&] { store_->set(key, value); });
}

Bytes C10dStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  return translated("store.get", key, [&] {
    store_->wait({key}, timeout);
    return store_->get(key);
  });
}

int64_t C10dStore::add(const std::string& key, int64_t delta) {
  return translated("store.add", key, [&] { return store_->add(key, delta); });
}

void C10dStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  translated("store.wait", keys.empty() ? std::string() : keys.front(),
             [&] { store_->wait(keys, timeout); });
}

}  // namespace strata::torch_backend
