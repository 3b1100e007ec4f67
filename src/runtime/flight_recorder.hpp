// The flight recorder: each communicator's last operations (sequence number, op, dtype, count,
// peer or root, state, timestamps), so that after a hang or a timeout a person can see which rank
// stopped at which sequence number. Dumped on a timeout, on a peer's death or abort, on abort(),
// on SIGUSR1 and on request (Communicator::flight_record); written to STRATA_DUMP_DIR when set.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "strata/error.hpp"
#include "strata/types.hpp"

namespace strata::runtime {

class FlightRecorder {
 public:
  /// Keeps the last `capacity` operations (0: records nothing).
  explicit FlightRecorder(size_t capacity);

  /// A new operation, queued now. Returns its id for started() and ended().
  uint64_t queued(const ErrorContext& where, bool collective, DataType dtype, size_t count,
                  Clock::time_point at = Clock::now());
  /// A collective that completed inside the call that issued it, at `at` (runtime/immediate.cpp):
  /// one record, queued, started and ended then, written under one lock.
  void completed(const ErrorContext& where, DataType dtype, size_t count, Clock::time_point at);
  /// An operation queued and started `at`, under one lock: one that began inside the call that
  /// issued it and is finished by the op queue (OpQueue::finish_later). Returns its id for ended().
  uint64_t running(const ErrorContext& where, bool collective, DataType dtype, size_t count,
                   Clock::time_point at);
  /// Started `at` (the op queue passes the clock reading it already made).
  void started(uint64_t id, Clock::time_point at = Clock::now());
  /// `error` empty: completed; else the failure, first line kept.
  void ended(uint64_t id, const std::string& error = {}, Clock::time_point at = Clock::now());

  /// The table, oldest first, with a header naming the rank, the group and `why`.
  std::string dump(const std::string& why) const;
  /// dump() to STRATA_DUMP_DIR/strata-flight-<group>-rank<r>.txt, or to stderr without it.
  void report(const std::string& why) const;

 private:
  enum class State : uint8_t { queued, running, done, failed };
  struct Record {
    uint64_t id = 0;
    int64_t seq = -1;
    std::string op;
    bool collective = true;
    DataType dtype = DataType::u8;
    size_t count = 0;
    int peer = -1;
    State state = State::queued;
    Clock::time_point queued_at{}, started_at{}, ended_at{};
    std::string error;
  };
  Record* find(uint64_t id);  // null once overwritten; needs mu_
  // A new record, queued `at`; null when recording nothing. Needs mu_.
  Record* add(const ErrorContext& where, bool collective, DataType dtype, size_t count,
              Clock::time_point at);

  mutable std::mutex mu_;
  std::vector<Record> ring_;
  uint64_t next_ = 1;
  int rank_ = -1;
  std::string group_;
};

/// SIGUSR1 makes every live recorder of the process report itself. The handler is installed on
/// the first call, only where SIGUSR1 still has its default action (it would kill the process).
void register_recorder(const FlightRecorder* r);
void unregister_recorder(const FlightRecorder* r);

}  // namespace strata::runtime
