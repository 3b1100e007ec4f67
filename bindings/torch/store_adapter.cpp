#include "store_adapter.hpp"

#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "strata/error.hpp"

namespace strata::torch_backend {
namespace {

// torch's store errors as Strata's, so the bootstrap reports them like its own store's
// (operation and key named) and knows a timeout, which it retries in slices, from a lost store.
// A timeout is DistStoreError from TCPStore and HashStore but a plain c10::Error
// ("Wait timeout") from FileStore, hence the look at the message.
ErrorCode classify(const c10::Error& e) {
  if (dynamic_cast<const c10::DistNetworkError*>(&e) != nullptr) return ErrorCode::transport;
  if (dynamic_cast<const c10::DistStoreError*>(&e) != nullptr) return ErrorCode::timeout;
  const std::string what = e.what_without_backtrace();
  const bool timeout =
      what.find("imeout") != std::string::npos || what.find("imed out") != std::string::npos;
  return timeout ? ErrorCode::timeout : ErrorCode::transport;
}

template <typename F>
auto translated(const char* op, const std::string& key, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const c10::Error& e) {
    throw Error(classify(e), ErrorContext{.op = op},
                "key '" + key + "': " + e.what_without_backtrace());
  }
}

// Waits until every key of `keys` exists, or throws a timeout at `timeout`. torch's own timed
// wait logs "[c10d] ... waitForInput ... likely a timeout" each time it expires, and Strata
// waits in 250 ms slices (bootstrap/await_rank.cpp): a rank 3 s late printed 24 such lines. So
// it asks with check(), which never blocks nor logs, backing off from 1 to 50 ms.
void wait_quietly(c10d::Store& store, const std::vector<std::string>& keys,
                  std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (!store.check(keys)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      throw Error(ErrorCode::timeout, ErrorContext{.op = "store.wait"},
                  "key '" + (keys.empty() ? std::string() : keys.front()) + "' not set within " +
                      std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace

C10dStore::C10dStore(const c10::intrusive_ptr<c10d::Store>& store) : store_(store->clone()) {}

void C10dStore::set(const std::string& key, const Bytes& value) {
  translated("store.set", key, [&] { store_->set(key, value); });
}

Bytes C10dStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  return translated("store.get", key, [&] {
    wait_quietly(*store_, {key}, timeout);
    return store_->get(key);
  });
}

int64_t C10dStore::add(const std::string& key, int64_t delta) {
  return translated("store.add", key, [&] { return store_->add(key, delta); });
}

void C10dStore::erase(const std::string& key) {
  translated("store.erase", key, [&] { store_->deleteKey(key); });
}

void C10dStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  translated("store.wait", keys.empty() ? std::string() : keys.front(),
             [&] { wait_quietly(*store_, keys, timeout); });
}

}  // namespace strata::torch_backend
