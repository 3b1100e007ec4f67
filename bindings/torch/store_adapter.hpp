// torch's c10d::Store (the TCPStore / PrefixStore that init_process_group hands a backend) as the
// strata::Store a Communicator meets its peers through.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "strata/store.hpp"

namespace strata::torch_backend {

class C10dStore final : public Store {
 public:
  /// Takes a clone of `store`: its own connection, so Strata's waits never hold torch's.
  explicit C10dStore(const c10::intrusive_ptr<c10d::Store>& store);
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  void erase(const std::string& key) override;

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace strata::torch_backend
