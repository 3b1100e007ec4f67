#include "sharding/async_file.hpp"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "sharding/fail.hpp"

namespace strata::sharding {
namespace {

// Disk I/O has no peer to time out, but a hung mount must not hang a job.
constexpr auto kIoDeadline = std::chrono::seconds(300);

std::string errno_text(int e) { return std::strerror(e); }

std::string free_space(const std::string& dir) {
  struct statvfs s {};
  if (::statvfs(dir.c_str(), &s) != 0) return "";
  return " (" + std::to_string(uint64_t(s.f_bavail) * s.f_frsize) + " bytes free)";
}

}  // namespace

AsyncFile::AsyncFile(const std::string& dir, size_t bytes, const std::string& op, int rank)
    : op_(op), rank_(rank) {
  std::string name = dir + "/strata-offload-r" + std::to_string(rank) + "-XXXXXX";
  std::vector<char> tmpl(name.begin(), name.end());
  tmpl.push_back('\0');
  fd_ = ::mkstemp(tmpl.data());
  if (fd_ < 0) fail(op_, rank_, "cannot create a file in " + dir + ": " + errno_text(errno));
  path_ = tmpl.data();
  ::unlink(path_.c_str());
  if (bytes > 0) {
    const int e = ::posix_fallocate(fd_, 0, off_t(bytes));
    if (e != 0) {
      ::close(fd_);
      fail(op_, rank_,
           "cannot allocate " + std::to_string(bytes) + " bytes for " + path_ + ": " +
               errno_text(e) + free_space(dir));
    }
  }
  thread_ = std::thread([this] { run(); });
}

AsyncFile::~AsyncFile() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  ::close(fd_);
}

AsyncFile::Ticket AsyncFile::read(size_t offset, void* dst, size_t bytes) {
  return submit({false, offset, static_cast<char*>(dst), bytes});
}
AsyncFile::Ticket AsyncFile::write(size_t offset, const void* src, size_t bytes) {
  return submit({true, offset, static_cast<char*>(const_cast<void*>(src)), bytes});
}

AsyncFile::Ticket AsyncFile::submit(Job j) {
  std::lock_guard<std::mutex> l(mu_);
  queue_.push_back(j);
  cv_.notify_all();
  return ++submitted_;
}

void AsyncFile::wait(Ticket t) {
  std::unique_lock<std::mutex> l(mu_);
  if (!cv_.wait_for(l, kIoDeadline, [&] { return done_ >= t || !error_.empty(); }))
    fail(op_, rank_, "I/O on " + path_ + " unfinished after 300 s", ErrorCode::timeout);
  if (!error_.empty()) fail(op_, rank_, error_, ErrorCode::internal);
}

void AsyncFile::run() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    const Job j = queue_.front();
    queue_.pop_front();
    l.unlock();
    std::string e = io(j);
    l.lock();
    if (error_.empty()) error_ = std::move(e);
    ++done_;
    cv_.notify_all();
  }
}

std::string AsyncFile::io(const Job& j) const {
  size_t at = 0;
  while (at < j.bytes) {
    const ssize_t n = j.write ? ::pwrite(fd_, j.data + at, j.bytes - at, off_t(j.offset + at))
                              : ::pread(fd_, j.data + at, j.bytes - at, off_t(j.offset + at));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return std::string(j.write ? "write to " : "read from ") + path_ + " at byte " +
             std::to_string(j.offset + at) + ": " + (n < 0 ? errno_text(errno) : "end of file");
    at += size_t(n);
  }
  return "";
}

}  // namespace strata::sharding
