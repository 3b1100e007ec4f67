// A process as another process on the same kernel can recognise it: pid, start time (so a reused
// pid is not mistaken for the original) and pid namespace (pids of another namespace mean nothing
// here). Lets a rank tell at once that a peer on its machine has died, without the network.
#pragma once

#include <cstdint>
#include <string>

namespace strata::bootstrap {

struct ProcessId {
  int64_t pid = 0;
  uint64_t start_ticks = 0;  ///< field 22 of /proc/<pid>/stat
  std::string kernel;        ///< boot id + pid namespace: equal means `pid` is valid here

  /// This process.
  static ProcessId self();
  /// "pid start kernel", and back (nullopt-like: pid 0 when malformed).
  std::string encode() const;
  static ProcessId decode(const std::string& text);

  /// True when `pid` names a process in our pid namespace on our kernel.
  bool observable() const;
  /// False once the process has exited (or is a zombie, or its pid was reused). Only meaningful
  /// when observable(); reads /proc, no signal is sent.
  bool alive() const;
  /// True while the process is stopped (SIGSTOP, SIGTSTP, a debugger). Like alive().
  bool stopped() const;
};

}  // namespace strata::bootstrap
