// The store a group is created through. Setting up, each rank publishes records every other rank
// reads once (its node, its UCX address, the shared segment's path); once the creation barrier
// returns every rank has read them, and this rank erases those it set. Without it the job's
// store, in rank 0's process, grew by about 2 KB with every split (issue 33). Claims of a rank
// stay (bootstrap/rank_claim.hpp: they catch a second process claiming it, and let this one
// create the group again), and so does what is set after creation.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "strata/store.hpp"

namespace strata::runtime {

class SetupStore final : public Store {
 public:
  explicit SetupStore(std::shared_ptr<Store> base) : base_(std::move(base)) {}
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    return base_->get(key, timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override { return base_->add(key, delta); }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    base_->wait(keys, timeout);
  }
  bool set_when_gone(const std::string& key, const Bytes& value) override {
    return base_->set_when_gone(key, value);
  }
  void erase(const std::string& key) override { base_->erase(key); }
  std::string local_address() override { return base_->local_address(); }

  /// Erases the keys this rank set so far and stops recording (after the creation barrier).
  void erase_setup_records();

 private:
  std::shared_ptr<Store> base_;
  std::mutex mu_;
  bool recording_ = true;
  std::vector<std::string> set_;  // keys set while recording
};

}  // namespace strata::runtime
