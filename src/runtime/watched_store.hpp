// The store a group made from another meets through: a hierarchical collective's node and rail
// groups, a split's new group. Their setup waits for every member to publish; a member that died
// or aborted the enclosing group meanwhile never will. Every blocking call here asks between
// short slices whether the enclosing group has learnt of a failure, and gives up at once when it
// has, so that the caller reports that member instead of timing out on a neighbour.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "strata/communicator.hpp"
#include "strata/store.hpp"

namespace strata::runtime {

class WatchedStore final : public Store {
 public:
  /// `failed` is asked before and between slices of every blocking call; true ends the call with
  /// ErrorCode::aborted naming no peer (the caller knows the culprit), saying `why`.
  WatchedStore(std::shared_ptr<Store> base, std::function<bool()> failed,
               std::string why = "the enclosing group failed while this group was set up");
  /// From now on `failed` is no longer asked (the group is set up; it may capture the caller's
  /// state). Blocking calls are still sliced.
  void stop_watching() { watching_.store(false); }
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool set_when_gone(const std::string& key, const Bytes& value) override;
  void erase(const std::string& key) override { base_->erase(key); }
  std::string local_address() override { return base_->local_address(); }

 private:
  /// Runs `call(slice)` in slices (bootstrap::in_slices); throws once `failed_()`.
  void watched(std::chrono::milliseconds timeout,
               const std::function<void(std::chrono::milliseconds)>& call);

  std::shared_ptr<Store> base_;
  std::function<bool()> failed_;
  std::string why_;
  std::atomic<bool> watching_{true};
};

/// `base` watched by `options.cancelled` (its setup ends when the caller cancels), or null when
/// the caller cannot cancel (then `base` serves as it is). stop_watching() once set up.
std::shared_ptr<WatchedStore> watch_for_cancel(std::shared_ptr<Store> base,
                                               const CommOptions& options);

}  // namespace strata::runtime
