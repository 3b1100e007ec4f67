#include "bootstrap/user_secret.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bootstrap/job_store.hpp"
#include "strata/error.hpp"

namespace strata::bootstrap {
namespace {

[[noreturn]] void refuse(const std::string& path, const std::string& why) {
  throw Error(ErrorCode::invalid_argument, {.op = "bootstrap"},
              "the per-user secret " + path + " " + why +
                  " (it keeps other users from deriving this job's token; fix or remove it, or "
                  "set STRATA_JOB_TOKEN on every rank)");
}

std::string directory() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  std::string cache = xdg && *xdg ? xdg : std::string(home && *home ? home : "/tmp") + "/.cache";
  ::mkdir(cache.c_str(), 0700);  // may exist; what matters is the file's own mode
  const std::string dir = cache + "/strata";
  ::mkdir(dir.c_str(), 0700);
  return dir;
}

// Writes a new secret beside `path` and links it into place: link() fails if another rank got
// there first, and then its secret is the one read.
void create(const std::string& path) {
  const std::string tmp = path + "." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) refuse(tmp, std::string("cannot be created: ") + std::strerror(errno));
  const std::string s = random_token() + "\n";
  const bool written = ::write(fd, s.data(), s.size()) == ssize_t(s.size());
  ::close(fd);
  if (written && ::link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST) {
    ::unlink(tmp.c_str());
    refuse(path, std::string("cannot be created: ") + std::strerror(errno));
  }
  ::unlink(tmp.c_str());
  if (!written) refuse(tmp, "cannot be written");
}

}  // namespace

std::string user_secret() {
  const std::string path = directory() + "/job-secret";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 && errno == ENOENT) {
    create(path);
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  }
  if (fd < 0) refuse(path, std::string("cannot be opened: ") + std::strerror(errno));
  struct stat st {};
  char buf[64] = {};
  const bool stated = ::fstat(fd, &st) == 0;
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (!stated || !S_ISREG(st.st_mode)) refuse(path, "is not a regular file");
  if (st.st_uid != ::getuid()) refuse(path, "belongs to another user");
  if (st.st_mode & 077) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
    refuse(path, std::string("has mode ") + mode + ", which lets others read or write it");
  }
  std::string s(buf, n > 0 ? size_t(n) : 0);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s.size() < 32) refuse(path, "holds no secret (fewer than 32 characters)");
  return s;
}

}  // namespace strata::bootstrap
