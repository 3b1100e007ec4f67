// Shared state behind a Work handle: completion, error and timing of one operation.
#pragma once

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>

#include "strata/store.hpp"

namespace strata::comm { class Engine; }

namespace strata::detail {

struct WorkState {
  enum class Status { queued, running, done, failed };

  std::mutex mu;
  std::condition_variable cv;
  Status status = Status::queued;
  std::exception_ptr error;
  Clock::time_point start{}, end{};
  std::weak_ptr<comm::Engine> engine;   // lets a waiting thread drive progress inline
  std::chrono::milliseconds default_timeout{300000};

  bool finished() {
    std::lock_guard<std::mutex> l(mu);
    return status == Status::done || status == Status::failed;
  }
  void mark_running() {
    std::lock_guard<std::mutex> l(mu);
    status = Status::running;
    start = Clock::now();
  }
  void complete(std::exception_ptr e = nullptr) {
    {
      std::lock_guard<std::mutex> l(mu);
      if (start == Clock::time_point{}) start = Clock::now();
      end = Clock::now();
      error = e;
      status = e ? Status::failed : Status::done;
    }
    cv.notify_all();
  }
};

}  // namespace strata::detail
