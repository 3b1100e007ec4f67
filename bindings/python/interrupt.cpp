#include "interrupt.hpp"

#include <Python.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace strata::py {
namespace {

std::atomic<int> g_waits{0};            // guards alive: a SIGINT without one wakes nobody
std::atomic<uint64_t> g_generation{0};  // Ctrl-Cs that aborted waits
int g_wake[2] = {-1, -1};               // the handler writes a byte, the watcher reads it
struct sigaction g_previous {};         // Python's handler, which ours calls after its own work
std::mutex g_mu;                        // guards g_waited and g_next_id
std::map<uint64_t, Communicator>* const g_waited = new std::map<uint64_t, Communicator>();
uint64_t g_next_id = 0;

// Async-signal-safe: a write to a pipe, then Python's own handler (which trips its flag, so the
// main thread raises KeyboardInterrupt once it runs Python again).
void on_sigint(int sig, siginfo_t* info, void* context) {
  if (g_waits.load(std::memory_order_relaxed) > 0) {
    const int saved = errno;
    const char byte = 1;
    (void)!write(g_wake[1], &byte, 1);
    errno = saved;
  }
  if (g_previous.sa_flags & SA_SIGINFO) {
    g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
  }
}

// With the GIL: whether Python's SIGINT handler is the default one, which raises
// KeyboardInterrupt. A handler of the program's own decides for itself what a Ctrl-C means.
bool python_raises_keyboard_interrupt() {
  PyObject* signal_module = PyImport_ImportModule("signal");
  if (!signal_module) {
    PyErr_Clear();
    return false;
  }
  PyObject* current = PyObject_CallMethod(signal_module, "getsignal", "i", SIGINT);
  PyObject* standard = PyObject_GetAttrString(signal_module, "default_int_handler");
  const bool raises = current && standard && current == standard;
  Py_XDECREF(current);
  Py_XDECREF(standard);
  Py_DECREF(signal_module);
  PyErr_Clear();
  return raises;
}

void abort_the_waited() {
  for (;;) {
    char bytes[64];
    const ssize_t n = read(g_wake[0], bytes, sizeof bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || !Py_IsInitialized()) return;
    const PyGILState_STATE gil = PyGILState_Ensure();
    const bool raises = python_raises_keyboard_interrupt();
    PyGILState_Release(gil);
    if (!raises) continue;
    std::vector<Communicator> waited;
    {
      std::lock_guard<std::mutex> l(g_mu);
      for (const auto& [id, comm] : *g_waited) waited.push_back(comm);
    }
    if (waited.empty()) continue;
    g_generation.fetch_add(1, std::memory_order_seq_cst);  // before the waits can end
    for (auto& comm : waited) {
      if (!comm) continue;  // a group being set up: its setup asks interrupted() (cancellable)
      try {
        comm.abort();
      } catch (...) {
      }
    }
  }
}

// Puts on_sigint in front of the current SIGINT handler, again if Python's signal.signal() has
// replaced it since; not where SIGINT is ignored or kills the process (no Python handler).
void chain_sigint_handler() {
  static std::once_flag started;
  std::call_once(started, [] {
    if (pipe2(g_wake, O_CLOEXEC) != 0) return;
    fcntl(g_wake[1], F_SETFL, O_NONBLOCK);
    std::thread(abort_the_waited).detach();
  });
  if (g_wake[0] < 0) return;
  struct sigaction current {};
  if (sigaction(SIGINT, nullptr, &current) != 0) return;
  if (current.sa_flags & SA_SIGINFO) {
    if (current.sa_sigaction == on_sigint) return;
  } else if (current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN) {
    return;
  }
  g_previous = current;  // Python's handler is installed, not ours: no race with on_sigint
  struct sigaction mine = current;
  mine.sa_flags |= SA_SIGINFO;
  mine.sa_sigaction = on_sigint;
  sigaction(SIGINT, &mine, nullptr);
}

}  // namespace

InterruptibleWait::InterruptibleWait(const Communicator& comm)
    : generation_(g_generation.load(std::memory_order_seq_cst)) {
  chain_sigint_handler();
  {
    std::lock_guard<std::mutex> l(g_mu);
    id_ = g_next_id++;
    g_waited->emplace(id_, comm);
  }
  g_waits.fetch_add(1, std::memory_order_relaxed);
}

InterruptibleWait::~InterruptibleWait() {
  g_waits.fetch_sub(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> l(g_mu);
  g_waited->erase(id_);
}

bool InterruptibleWait::interrupted() const {
  return g_generation.load(std::memory_order_seq_cst) != generation_;
}

const InterruptApi& interrupt_api() {
  static const InterruptApi api{
      [](const Communicator& comm) -> void* { return new InterruptibleWait(comm); },
      [](const void* g) { return static_cast<const InterruptibleWait*>(g)->interrupted(); },
      [](void* g) { delete static_cast<InterruptibleWait*>(g); }};
  return api;
}

}  // namespace strata::py
