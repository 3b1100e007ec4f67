#include "bootstrap/process_id.hpp"

#include <unistd.h>

#include <fstream>
#include <sstream>

namespace strata::bootstrap {
namespace {

std::string kernel_of_self() {
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  char ns[128] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  return boot + "/" + (n > 0 ? std::string(ns, size_t(n)) : std::string("?"));
}

// State letter and start time of /proc/<pid>/stat; false when the process is gone. The command
// name (field 2) may hold spaces and parentheses, so parsing starts after its last ')'.
bool read_stat(int64_t pid, char& state, uint64_t& start) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return false;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(line.substr(close + 1));
  rest >> state;
  std::string skip;
  for (int field = 4; field < 22; ++field) rest >> skip;  // fields 4..21
  rest >> start;
  return bool(rest);
}

}  // namespace

ProcessId ProcessId::self() {
  static const ProcessId me = [] {
    ProcessId p;
    p.pid = ::getpid();
    char state = 0;
    read_stat(p.pid, state, p.start_ticks);
    p.kernel = kernel_of_self();
    return p;
  }();
  return me;
}

std::string ProcessId::encode() const {
  return std::to_string(pid) + " " + std::to_string(start_ticks) + " " + kernel;
}

ProcessId ProcessId::decode(const std::string& text) {
  ProcessId p;
  std::istringstream in(text);
  if (!(in >> p.pid >> p.start_ticks >> p.kernel) || p.pid <= 0) return ProcessId{};
  return p;
}

bool ProcessId::observable() const { return pid > 0 && kernel == self().kernel; }

bool ProcessId::alive() const {
  char state = 0;
  uint64_t start = 0;
  if (!read_stat(pid, state, start)) return false;
  return state != 'Z' && state != 'X' && start == start_ticks;
}

bool ProcessId::stopped() const {
  char state = 0;
  uint64_t start = 0;
  return read_stat(pid, state, start) && start == start_ticks && (state == 'T' || state == 't');
}

}  // namespace strata::bootstrap
