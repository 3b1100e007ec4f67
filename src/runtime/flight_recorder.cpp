#include "runtime/flight_recorder.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "base/config.hpp"
namespace strata::runtime {

FlightRecorder::FlightRecorder(size_t capacity) : ring_(capacity) {}

FlightRecorder::Record* FlightRecorder::find(uint64_t id) {
  if (ring_.empty()) return nullptr;
  Record& r = ring_[id % ring_.size()];
  return r.id == id ? &r : nullptr;
}

FlightRecorder::Record* FlightRecorder::add(const ErrorContext& where, bool collective,
                                            DataType dtype, size_t count, Clock::time_point at) {
  const uint64_t id = next_++;
  if (ring_.empty()) return nullptr;
  rank_ = where.rank;
  if (group_.empty()) group_ = where.group;
  Record& r = ring_[id % ring_.size()];
  r.id = id;
  r.seq = where.seq;
  r.op = where.op;  // reuses the record's string: no allocation once the ring has gone round
  r.collective = collective;
  r.dtype = dtype;
  r.count = count;
  r.peer = where.peer;
  r.state = State::queued;
  r.queued_at = at;
  r.started_at = r.ended_at = {};
  r.error.clear();
  return &r;
}

uint64_t FlightRecorder::queued(const ErrorContext& where, bool collective, DataType dtype,
                                size_t count, Clock::time_point at) {
  std::lock_guard<std::mutex> l(mu_);
  Record* r = add(where, collective, dtype, count, at);
  return r ? r->id : next_ - 1;
}

void FlightRecorder::completed(const ErrorContext& where, DataType dtype, size_t count,
                               Clock::time_point at) {
  std::lock_guard<std::mutex> l(mu_);
  if (Record* r = add(where, true, dtype, count, at)) {
    r->state = State::done;
    r->started_at = r->ended_at = at;
  }
}

uint64_t FlightRecorder::running(const ErrorContext& where, bool collective, DataType dtype,
                                 size_t count, Clock::time_point at) {
  std::lock_guard<std::mutex> l(mu_);
  Record* r = add(where, collective, dtype, count, at);
  if (!r) return next_ - 1;
  r->state = State::running;
  r->started_at = at;
  return r->id;
}

void FlightRecorder::started(uint64_t id, Clock::time_point at) {
  std::lock_guard<std::mutex> l(mu_);
  if (Record* r = find(id)) r->state = State::running, r->started_at = at;
}

void FlightRecorder::ended(uint64_t id, const std::string& error, Clock::time_point at) {
  std::lock_guard<std::mutex> l(mu_);
  Record* r = find(id);
  if (!r) return;
  r->ended_at = at;
  r->state = error.empty() ? State::done : State::failed;
  if (!error.empty()) r->error = error.substr(0, error.find('\n'));
}

std::string FlightRecorder::dump(const std::string& why) const {
  std::lock_guard<std::mutex> l(mu_);
  const auto now = Clock::now();
  auto ms = [&](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(now - t).count();
  };
  std::ostringstream o;
  const uint64_t total = next_ - 1;
  o << "# strata flight recorder: rank " << rank_ << " of group " << group_ << " (" << why
    << "), last " << std::min<uint64_t>(total, ring_.size()) << " of " << total
    << " operations, oldest first; times in ms before now\n"
    << "#    seq  kind  op              dtype     count  peer  state    queued  started    ended\n";
  static const char* kState[] = {"queued", "running", "done", "FAILED"};
  const uint64_t first = total > ring_.size() ? total - ring_.size() + 1 : 1;
  for (uint64_t id = first; id <= total; ++id) {
    const Record& r = ring_[id % ring_.size()];
    if (r.id != id) continue;
    char line[256];
    auto t = [&](Clock::time_point p) { return p == Clock::time_point{} ? -1.0 : ms(p); };
    std::snprintf(line, sizeof line,
                  "%8lld  %-4s  %-14s  %-5s  %10zu  %4d  %-7s  %7.1f  %7.1f  %7.1f",
                  static_cast<long long>(r.seq), r.collective ? "coll" : "p2p", r.op.c_str(),
                  r.count ? std::string(dtype_name(r.dtype)).c_str() : "-", r.count, r.peer,
                  kState[int(r.state)], t(r.queued_at), t(r.started_at), t(r.ended_at));
    o << line;
    if (!r.error.empty()) o << "  " << r.error;
    o << '\n';
  }
  return o.str();
}

void FlightRecorder::report(const std::string& why) const {
  const std::string text = dump(why);
  if (const std::string& dir = config().dump_dir; !dir.empty()) {
    std::string group;
    {
      std::lock_guard<std::mutex> l(mu_);
      group = group_;
    }
    for (char& ch : group)
      if (ch == '/') ch = '_';
    const std::string path =
        dir + "/strata-flight-" + group + "-rank" + std::to_string(rank_) + ".txt";
    std::ofstream f(path, std::ios::app);
    f << text;
    if (f) return;
  }
  std::fputs(text.c_str(), stderr);
}

namespace {

std::mutex g_mu;
std::set<const FlightRecorder*>& recorders() {
  static std::set<const FlightRecorder*> s;
  return s;
}
int g_pipe[2] = {-1, -1};

void on_sigusr1(int) {
  const char b = 1;
  ssize_t ignored = ::write(g_pipe[1], &b, 1);  // async-signal-safe; the thread does the rest
  (void)ignored;
}

// Installs the handler and its reporting thread once per process.
void install_signal_handler() {
  struct sigaction old {};
  if (::sigaction(SIGUSR1, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) return;
  if (::pipe2(g_pipe, O_CLOEXEC) != 0) return;
  std::thread([] {
    char b;
    while (::read(g_pipe[0], &b, 1) == 1) {
      std::lock_guard<std::mutex> l(g_mu);
      for (const FlightRecorder* r : recorders()) r->report("SIGUSR1");
    }
  }).detach();
  struct sigaction sa {};
  sa.sa_handler = on_sigusr1;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR1, &sa, nullptr);
}

}  // namespace

void register_recorder(const FlightRecorder* r) {
  static std::once_flag once;
  std::call_once(once, install_signal_handler);
  std::lock_guard<std::mutex> l(g_mu);
  recorders().insert(r);
}

void unregister_recorder(const FlightRecorder* r) {
  std::lock_guard<std::mutex> l(g_mu);
  recorders().erase(r);
}

}  // namespace strata::runtime
