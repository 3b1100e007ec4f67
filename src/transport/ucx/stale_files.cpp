#include "transport/ucx/stale_files.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "base/log.hpp"

namespace strata::ucx {
namespace {

namespace fs = std::filesystem;
constexpr const char* kDir = "/dev/shm";
constexpr const char* kPrefix = "ucx_shm_posix_";

// Drops from `candidates` every path some process has open (fd) or mapped (maps).
void drop_held(std::set<std::string>& candidates) {
  std::error_code ec;
  for (const auto& proc : fs::directory_iterator("/proc", ec)) {
    const std::string pid = proc.path().filename().string();
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code fd_ec;
    for (const auto& fd : fs::directory_iterator(proc.path() / "fd", fd_ec)) {
      std::error_code link_ec;
      const std::string target = fs::read_symlink(fd.path(), link_ec).string();
      if (!link_ec) candidates.erase(target);
    }
    std::ifstream maps(proc.path() / "maps");
    std::string line;
    while (std::getline(maps, line)) {
      const size_t at = line.find(kDir);
      if (at != std::string::npos) candidates.erase(line.substr(at, line.find(' ', at) - at));
    }
    if (candidates.empty()) return;
  }
}

}  // namespace

int reclaim_stale_files() {
  if (const char* v = std::getenv("UCX_POSIX_USE_PROC_LINK"); v && (*v == 'n' || *v == '0')) {
    return 0;
  }
  std::set<std::string> candidates;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kDir, ec)) {
    struct stat st {};
    const std::string path = e.path().string();
    if (e.path().filename().string().rfind(kPrefix, 0) == 0 && ::stat(path.c_str(), &st) == 0 &&
        st.st_uid == ::getuid()) {
      candidates.insert(path);
    }
  }
  if (candidates.empty()) return 0;
  drop_held(candidates);
  int removed = 0;
  for (const auto& path : candidates) removed += ::unlink(path.c_str()) == 0;
  if (removed > 0) {
    STRATA_LOG(WARN, "SHM") << "removed " << removed
                            << " shared-memory file(s) that a dead process left in /dev/shm";
  }
  return removed;
}

}  // namespace strata::ucx
