// Ctrl-C during a wait. Work.wait() blocks in C++ with the GIL released, often running the
// collective on its own thread, so Python cannot raise KeyboardInterrupt until the operation ends
// or its deadline (STRATA_TIMEOUT, 300 s) passes: a rank waiting for a peer that never comes
// ignored Ctrl-C for five minutes. A SIGINT handler chained in front of Python's wakes a thread
// that, when Python's own handler is the default one (it raises KeyboardInterrupt), aborts the
// communicators being waited on: their waits end at once, their peers fail naming this rank, and
// the wait raises KeyboardInterrupt. A program that installed its own SIGINT handler (to stop
// after the current step, say) keeps its operations running. Uses only the Python C API and
// Strata's public one.
#pragma once

#include <cstdint>

#include "strata/communicator.hpp"

namespace strata::py {

/// Registers `comm` as waited on by this thread for the guard's lifetime. Taken with the GIL held
/// or not (the torch backend's waits run without it); without it, a signal.signal() on another
/// thread at that very moment may be put behind this module's handler rather than in front.
class InterruptibleWait {
 public:
  explicit InterruptibleWait(const Communicator& comm);
  /// A wait with no group to abort (a group being set up): a Ctrl-C only sets interrupted().
  InterruptibleWait() : InterruptibleWait(Communicator{}) {}
  ~InterruptibleWait();
  InterruptibleWait(const InterruptibleWait&) = delete;
  InterruptibleWait& operator=(const InterruptibleWait&) = delete;
  /// True when a Ctrl-C aborted the waited communicators since the guard was taken.
  bool interrupted() const;

 private:
  uint64_t id_;
  uint64_t generation_;
};

/// The guard for another extension module, the torch backend: it must share this module's one
/// SIGINT handler and watcher (a second copy would chain in front of this one, each then calling
/// the other). _strata exports this table as the capsule kInterruptCapsule.
struct InterruptApi {
  void* (*begin)(const Communicator& comm);  ///< a new InterruptibleWait (GIL held or not)
  bool (*interrupted)(const void* guard);
  void (*end)(void* guard);  ///< deletes it
};
inline constexpr const char* kInterruptCapsule = "strata._strata._interrupt_api";
const InterruptApi& interrupt_api();

}  // namespace strata::py
