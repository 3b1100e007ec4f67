#include "shm/window.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace strata::shm {
namespace {

size_t page_rounded(size_t bytes) {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  return std::max<size_t>((bytes + page - 1) / page * page, page);
}

uint8_t* map(int fd, size_t bytes, const std::string& what, const ErrorContext& where) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    throw Error(
        ErrorCode::transport, where,
        "cannot map " + what + " of " + std::to_string(bytes) + " bytes: " + std::strerror(errno));
  }
  return static_cast<uint8_t*>(p);
}

}  // namespace

Window::Window(uint32_t id, int rank, int size, size_t bytes, const ErrorContext& where)
    : id_(id), rank_(rank), bytes_(bytes), mapped_(page_rounded(bytes)), parts_(size_t(size)) {
  fd_ = ::memfd_create("strata-symmetric", MFD_CLOEXEC);
  if (fd_ < 0 || ::ftruncate(fd_, off_t(mapped_)) != 0) {
    const std::string why = std::strerror(errno);
    if (fd_ >= 0) ::close(fd_);
    throw Error(ErrorCode::transport, where,
                "cannot make a symmetric buffer of " + std::to_string(bytes) + " bytes: " + why);
  }
  try {
    parts_[size_t(rank)] = map(fd_, mapped_, "a symmetric buffer", where);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

Window::~Window() {
  for (uint8_t* p : parts_) {
    if (p) ::munmap(p, mapped_);
  }
  ::close(fd_);
}

std::string Window::path() const {
  return "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fd_);
}

void Window::map_peer(int rank, const std::string& path, const ErrorContext& where) {
  ErrorContext at = where;
  at.peer = rank;
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    throw Error(ErrorCode::transport, at,
                "cannot open rank " + std::to_string(rank) + "'s symmetric buffer " + path + ": " +
                    std::strerror(errno));
  }
  try {
    parts_[size_t(rank)] =
        map(fd, mapped_, "rank " + std::to_string(rank) + "'s symmetric buffer " + path, at);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);  // the mapping keeps the memory
}

void Windows::add(const std::shared_ptr<Window>& w) {
  std::lock_guard<std::mutex> l(mu_);
  std::erase_if(live_, [](const std::weak_ptr<Window>& x) { return x.expired(); });
  live_.push_back(w);
}

Windows::Found Windows::find(const void* p, size_t bytes) const {
  const auto* b = static_cast<const uint8_t*>(p);
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& weak : live_) {
    const std::shared_ptr<Window> w = weak.lock();
    if (!w || b < w->mine() || b > w->mine() + w->bytes()) continue;
    const size_t offset = size_t(b - w->mine());
    if (bytes <= w->bytes() - offset) return {w->id(), offset};
  }
  return {};
}

std::shared_ptr<Window> Windows::get(uint32_t id) const {
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& weak : live_) {
    std::shared_ptr<Window> w = weak.lock();
    if (w && w->id() == id) return w;
  }
  return nullptr;
}

}  // namespace strata::shm
