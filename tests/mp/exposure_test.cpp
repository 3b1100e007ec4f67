// What a job on one machine exposes to the machine's other users: its TCP listening sockets are
// all on loopback (the store's and UCX's; UCX would listen on every interface), and no SysV
// segment it made is open to the group (UCX makes its own mode 0660: transport/ucx/scope.hpp).
// Runs without network namespaces only: the cluster tests' nodes do listen on their interfaces.
#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

#include "mp.hpp"

using namespace strata;

namespace {

// Inodes of this process's sockets.
std::set<std::string> my_socket_inodes() {
  std::set<std::string> inodes;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return inodes;
  while (dirent* e = ::readdir(d)) {
    char target[256] = {};
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
    const std::string t(target, n > 0 ? size_t(n) : 0);
    if (t.rfind("socket:[", 0) == 0) inodes.insert(t.substr(8, t.size() - 9));
  }
  ::closedir(d);
  return inodes;
}

// "address:port" (hex, as /proc/net/tcp* spell it) of each of this process's listening sockets.
std::vector<std::string> my_listening_addresses() {
  const std::set<std::string> mine = my_socket_inodes();
  std::vector<std::string> found;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream f(table);
    std::string line;
    std::getline(f, line);  // header
    while (std::getline(f, line)) {
      std::istringstream in(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      in >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >>
          inode;
      if (state == "0A" && mine.count(inode)) found.push_back(local);  // 0A: LISTEN
    }
  }
  return found;
}

bool loopback(const std::string& hex_address) {
  const std::string ip = hex_address.substr(0, hex_address.find(':'));
  if (ip.size() == 8) return ip.substr(6) == "7F";  // IPv4, little-endian: 127.x.x.x
  return ip == "00000000000000000000000001000000";  // IPv6 ::1
}

}  // namespace

TEST(Exposure, AOneMachineJobListensOnLoopbackOnly) {
  auto& w = mp::world();
  std::vector<float> v(1 << 20, 1.0f);  // large enough for UCX's rendezvous, where it has one
  w.all_reduce(buffer(v), ReduceOp::sum).wait();
  if (w.size() > 1) {  // a point-to-point message between every pair takes UCX's local path
    const int next = (w.rank() + 1) % w.size(), prev = (w.rank() + w.size() - 1) % w.size();
    std::vector<float> got(v.size());
    Work r = w.recv(buffer(got), prev, 5);
    w.send(buffer(v), next, 5).wait();
    r.wait();
  }
  const std::vector<std::string> listening = my_listening_addresses();
  // Rank 0 serves the job's store: finding none means the search below looked at nothing.
  if (w.rank() == 0) {
    EXPECT_FALSE(listening.empty()) << "rank 0's store listener was not found";
  }
  for (const std::string& a : listening) {
    EXPECT_TRUE(loopback(a)) << "rank " << w.rank() << " listens on " << a
                             << " (hex, /proc/net/tcp*), not on loopback";
  }
  // This process made no SysV segment the group may open (/proc/sysvipc/shm: perms, cpid).
  std::ifstream shm("/proc/sysvipc/shm");
  std::string line;
  std::getline(shm, line);
  while (std::getline(shm, line)) {
    std::istringstream in(line);
    long long key = 0, id = 0, size = 0, cpid = 0;
    std::string perms;
    in >> key >> id >> perms >> size >> cpid;
    if (cpid != ::getpid()) continue;
    EXPECT_EQ(std::stoi(perms, nullptr, 8) & 077, 0)
        << "rank " << w.rank() << " made SysV segment " << id << " with mode " << perms;
  }
  w.barrier().wait();
}
