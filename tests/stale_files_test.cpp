// ucx::reclaim_stale_files removes UCX posix files nobody holds, and only those.
#include "transport/ucx/stale_files.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace {
namespace fs = std::filesystem;

std::string make(const std::string& name) {
  const std::string path = "/dev/shm/" + name;
  int fd = ::open(path.c_str(), O_CREAT | O_RDWR, 0600);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::ftruncate(fd, 4096), 0);
  ::close(fd);
  return path;
}

TEST(StaleFiles, RemovesOnlyUnheldUcxFiles) {
  const std::string id = std::to_string(::getpid());
  const std::string stale = make("ucx_shm_posix_stale" + id);
  const std::string open_one = make("ucx_shm_posix_open" + id);
  const std::string mapped_one = make("ucx_shm_posix_mapped" + id);
  const std::string other = make("not_ucx_" + id);

  const int held = ::open(open_one.c_str(), O_RDWR);  // like UCX between shm_open and unlink
  ASSERT_GE(held, 0);
  const int m = ::open(mapped_one.c_str(), O_RDWR);
  void* map = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, m, 0);
  ASSERT_NE(map, MAP_FAILED);
  ::close(m);  // only the mapping holds it now

  EXPECT_GE(strata::ucx::reclaim_stale_files(), 1);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(open_one));
  EXPECT_TRUE(fs::exists(mapped_one));
  EXPECT_TRUE(fs::exists(other));

  ::close(held);
  ::munmap(map, 4096);
  for (const auto& p : {open_one, mapped_one, other}) fs::remove(p);
}

}  // namespace
