// A scratch file read and written by one background thread, in submission order: a read queued
// after a write of the same bytes sees that write. What the optimizer-state offload streams
// through (state_store.hpp).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

namespace strata::sharding {

class AsyncFile {
 public:
  using Ticket = uint64_t;

  /// Creates a file of `bytes` in `dir`, unlinked at once (it vanishes with the process) and
  /// allocated now, so a missing or unwritable directory or a full disk fails here, naming the
  /// path. `op` and `rank` name the caller in errors.
  AsyncFile(const std::string& dir, size_t bytes, const std::string& op, int rank);
  ~AsyncFile();
  AsyncFile(const AsyncFile&) = delete;
  AsyncFile& operator=(const AsyncFile&) = delete;

  Ticket read(size_t offset, void* dst, size_t bytes);
  Ticket write(size_t offset, const void* src, size_t bytes);
  /// Waits until `t` and everything queued before it are done; throws the first I/O error.
  void wait(Ticket t);
  void drain() { wait(submitted_); }
  const std::string& path() const { return path_; }

 private:
  struct Job {
    bool write;
    size_t offset;
    char* data;
    size_t bytes;
  };
  Ticket submit(Job j);
  void run();
  std::string io(const Job& j) const;  // "" or what went wrong

  std::string path_, op_;
  int rank_, fd_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  Ticket submitted_ = 0, done_ = 0;
  std::string error_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace strata::sharding
