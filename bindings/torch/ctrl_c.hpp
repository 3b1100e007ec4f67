// Ctrl-C during a torch wait: the Python module's guard (bindings/python/interrupt.hpp), reached
// through the capsule _strata exports, so that both modules share its one SIGINT handler. While
// a host wait runs, a Ctrl-C (with Python's default SIGINT handler) aborts the group: the wait
// ends at once instead of at the group's timeout, the peers fail naming this rank, and Python's
// main thread raises KeyboardInterrupt; a wait on another thread fails with the abort.
#pragma once

#include "strata/communicator.hpp"

namespace strata::torch_backend {

class CtrlC {
 public:
  /// At import, with the GIL: finds _strata's guard (without it, a Ctrl-C waits as before).
  static void load();
  /// Registers `group` as waited on by this thread until the guard goes; needs no GIL.
  explicit CtrlC(const Communicator& group);
  ~CtrlC();
  CtrlC(const CtrlC&) = delete;
  CtrlC& operator=(const CtrlC&) = delete;
  /// After the wait failed: when a Ctrl-C aborted it, raises Python's pending KeyboardInterrupt
  /// (pybind11::error_already_set; on Python's main thread only, where signals are handled).
  void raise_if_interrupted() const;

 private:
  void* guard_ = nullptr;
};

}  // namespace strata::torch_backend
