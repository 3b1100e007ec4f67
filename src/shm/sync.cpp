#include "shm/sync.hpp"

#include <immintrin.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <optional>

#include "base/spin_policy.hpp"

namespace strata::shm {

const char* kind_name(uint32_t k) {
  switch (Kind(k)) {
    case Kind::all_reduce:
      return "all_reduce";
    case Kind::reduce_scatter:
      return "reduce_scatter";
    case Kind::all_gather:
      return "all_gather";
    case Kind::all_to_all:
      return "all_to_all";
    case Kind::broadcast:
      return "broadcast";
    case Kind::all_to_allv:
      return "all_to_allv";
  }
  return "unknown collective";
}

namespace {

// A value a rank publishes and the count of ranks asleep on it: a Counter, or a Line's seq.
struct Flag {
  std::atomic<uint64_t>& value;
  std::atomic<uint32_t>& waiters;
};

// The futex word is the low 32 bits of the 64-bit value (little-endian x86-64).
uint32_t* futex_word(std::atomic<uint64_t>& v) { return reinterpret_cast<uint32_t*>(&v); }

void futex_wait(std::atomic<uint64_t>& v, uint32_t seen, std::chrono::milliseconds max) {
  timespec ts{long(max.count() / 1000), long(max.count() % 1000) * 1000000};
  // Shared (not FUTEX_PRIVATE) because the word lives in memory mapped by several processes.
  syscall(SYS_futex, futex_word(v), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void publish_flag(Flag f, uint64_t value) {
  f.value.store(value, std::memory_order_seq_cst);
  if (f.waiters.load(std::memory_order_seq_cst) > 0) {
    syscall(SYS_futex, futex_word(f.value), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  }
}

// "all_reduce(f32 x 4, sum)", as STRATA_CHECK's full exchange spells a call (counts per rank).
std::string described(const Expect& e) {
  std::string s = kind_name(uint32_t(e.kind));
  const uint32_t dt = e.call >> 8 & 0xFF, reduce = e.call & 0xFF, root = e.call >> 16;
  if (dt > uint32_t(kLastDataType)) return s + "(?)";
  s += '(';
  s += dtype_name(DataType(dt));
  // all_to_allv's chunks carry no size: every rank's differs.
  if (e.kind != Kind::all_to_allv) s += " x " + std::to_string(e.bytes / dtype_size(DataType(dt)));
  if (reduce != 0xFF) {
    s += ", ";
    s += reduce <= uint32_t(kLastReduceOp) ? op_name(ReduceOp(reduce)) : "?";
  }
  if (root != 0) s += ", root " + std::to_string(root - 1);
  return s + ")";
}

// "collective mismatch: this rank is in X, rank 3 in Y".
std::string mismatch(const Expect& mine, int rank, const Expect& theirs) {
  return "collective mismatch: this rank is in " + described(mine) + ", rank " +
         std::to_string(rank) + " in " + described(theirs);
}

// A Line's `what`: kind, size (<= kLineBytes) and the call word's dtype and reduction (tiny
// collectives are all-reduces: no root).
uint32_t line_what(const Expect& e) {
  return uint32_t(e.kind) << 24 | uint32_t(e.bytes) << 16 | (e.call & 0xFFFF);
}
Expect line_expect(uint32_t what) {
  return {Kind(what >> 24), uint64_t(what >> 16 & 0xFF), what & 0xFFFF};
}
Expect stamp_expect(const Stamp& st) {
  return {Kind(st.kind.load(std::memory_order_relaxed)), st.bytes.load(std::memory_order_relaxed),
          st.call.load(std::memory_order_relaxed)};
}

// Waits until `rank`'s flag reaches `target`. On the slow path (after spinning), asks the
// watchdog, `rank`'s gave_up flag and `other_path(rank)`: what collective that rank is in when it
// is one of the other path (tiny, in one line; or staged), which this wait would never see. The
// flag is read again after that answer: a peer that published it and went on to a collective of
// the other path is not in a mismatch (it stored the flag first, so the answer implies it).
template <typename OtherPath>
void wait_flag(Segment& s, int rank, Flag f, uint64_t target, Clock::time_point deadline,
               const ErrorContext& where, OtherPath other_path) {
  // Most waits end within a few hundred nanoseconds: poll before paying for a clock read (not when
  // oversubscribed, where the peer may need this core: spin_policy.hpp).
  for (int i = 0, n = s.oversubscribed() ? 1 : 64; i < n; ++i) {
    if (f.value.load(std::memory_order_acquire) >= target) return;
    _mm_pause();
  }
  const auto spin_until = Clock::now() + spin_budget(s.oversubscribed());
  do {
    for (int i = 0; i < 32; ++i) {
      if (f.value.load(std::memory_order_acquire) >= target) return;
      _mm_pause();
    }
  } while (Clock::now() < spin_until);
  if (s.oversubscribed()) {
    // More ranks than cores: the rank we wait for may be queued behind us on our core. Yielding
    // hands it the core at once, where a futex sleep would cost a wake-up (~250 us here); bounded
    // so that a long wait does not turn into a system-call storm.
    const auto yield_until = Clock::now() + kOversubscribedYield;
    while (Clock::now() < yield_until) {
      if (f.value.load(std::memory_order_acquire) >= target) return;
      sched_yield();
    }
  }
  for (;;) {
    // Asleep, a dead peer would only show at the deadline: ask whether one has died, or whether
    // the peer has abandoned this collective or is in another one. A peer that published and
    // then exited (its job done) is not a failure of this wait: read the flag again first.
    if (s.watchdog()) {
      try {
        s.watchdog()->check(where);
      } catch (const Error&) {
        if (f.value.load(std::memory_order_acquire) >= target) return;
        throw;
      }
    }
    // A peer that published what this wait needs and gave up later is seen there, not here.
    if (s.header(rank).gave_up.load(std::memory_order_acquire) &&
        f.value.load(std::memory_order_acquire) < target) {
      ErrorContext w = where;
      w.peer = rank;
      const auto& why = s.header(rank).why;
      throw Error(ErrorCode::invalid_argument, w,
                  "rank " + std::to_string(rank) +
                      " abandoned this collective: " + std::string(why, strnlen(why, sizeof why)));
    }
    if (const std::optional<std::string> other = other_path(rank);
        other && f.value.load(std::memory_order_acquire) < target) {
      give_up(s, rank, where, *other);
    }
    // Announce the sleep, then look once more: publish stores before it reads `waiters`, so
    // either it sees us or we see its value.
    f.waiters.fetch_add(1, std::memory_order_seq_cst);
    uint64_t seen = f.value.load(std::memory_order_seq_cst);
    if (seen < target) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() > 0)
        futex_wait(f.value, uint32_t(seen), std::min(left, std::chrono::milliseconds(100)));
    }
    f.waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (f.value.load(std::memory_order_acquire) >= target) return;
    if (Clock::now() >= deadline) {
      ErrorContext w = where;
      w.peer = rank;
      throw Error(ErrorCode::timeout, w,
                  "timed out in the shared-memory path waiting for peer " + std::to_string(rank) +
                      " (STRATA_TIMEOUT; is that rank alive and in the same collective?)");
    }
  }
}

// Marks this rank as having abandoned the collective, quoting `why` to its peers' waits.
void abandon(Segment& s, const std::string& why) {
  auto& mine = s.header(s.rank());
  std::memcpy(mine.why, why.c_str(), std::min(why.size() + 1, sizeof mine.why - 1));
  mine.why[sizeof mine.why - 1] = 0;
  mine.gave_up.store(1, std::memory_order_release);
}
}  // namespace

void give_up(Segment& s, int rank, const ErrorContext& where, const std::string& what) {
  abandon(s, "rank " + std::to_string(s.rank()) + " found a " + what);
  ErrorContext w = where;
  w.peer = rank;
  throw Error(ErrorCode::invalid_argument, w, what);
}

bool all_issued(Segment& s, uint64_t count) {
  for (int j = 0; j < s.size(); ++j) {
    if (s.header(j).issued.value.load(std::memory_order_acquire) < count) return false;
  }
  return true;
}

void publish(Segment& s, Field f, uint64_t value) {
  auto& c = s.header(s.rank()).*f;
  publish_flag({c.value, c.waiters}, value);
}

namespace {

// wait_for, for a collective `mine` (when known) that its message names.
void wait_counter(Segment& s, int rank, Field f, uint64_t value, Clock::time_point deadline,
                  const ErrorContext& where, const Expect* mine) {
  auto& c = s.header(rank).*f;
  // A peer waited on here can be in a tiny collective only if the ranks called different ones:
  // it would have had to finish this one first.
  wait_flag(s, rank, {c.value, c.waiters}, value, deadline, where,
            [&](int j) -> std::optional<std::string> {
              for (const auto& line : s.header(j).lines) {
                if (line.seq.load(std::memory_order_acquire) > s.next_line) {
                  const Expect theirs = line_expect(line.what.load());
                  if (mine) return mismatch(*mine, j, theirs);
                  return "collective mismatch: this rank is in a collective of more than " +
                         std::to_string(kLineBytes) + " bytes, rank " + std::to_string(j) + " in " +
                         described(theirs);
                }
              }
              return std::nullopt;
            });
}

}  // namespace

void wait_for(Segment& s, int rank, Field f, uint64_t value, Clock::time_point deadline,
              const ErrorContext& where) {
  wait_counter(s, rank, f, value, deadline, where, nullptr);
}

void publish_line(Segment& s, uint64_t number, const Expect& e, const void* data) {
  auto& line = s.header(s.rank()).lines[number % 2];
  line.what.store(line_what(e), std::memory_order_relaxed);
  std::memcpy(line.payload, data, e.bytes);
  publish_flag({line.seq, line.waiters}, number);  // releases what and payload with it
}

const uint8_t* wait_line(Segment& s, int rank, uint64_t number, const Expect& e,
                         Clock::time_point deadline, const ErrorContext& where) {
  auto& line = s.header(rank).lines[number % 2];
  // A peer that has staged a chunk this rank has not is in a staged collective at this point of
  // the sequence: it would have had to finish this tiny one first.
  wait_flag(s, rank, {line.seq, line.waiters}, number, deadline, where,
            [&](int j) -> std::optional<std::string> {
              if (s.header(j).written.value.load(std::memory_order_acquire) <= s.next_chunk) {
                return std::nullopt;
              }
              const auto& st = s.header(j).stamps[s.next_chunk % uint64_t(s.depth())];
              return mismatch(e, j, stamp_expect(st));
            });
  const uint32_t what = line.what.load(std::memory_order_relaxed);
  if (what != line_what(e)) give_up(s, rank, where, mismatch(e, rank, line_expect(what)));
  return line.payload;
}

bool line_ready(Segment& s, int rank, uint64_t number, const Expect& e) {
  const auto& line = s.header(rank).lines[number % 2];
  return line.seq.load(std::memory_order_acquire) >= number &&
         line.what.load(std::memory_order_relaxed) == line_what(e);
}

void publish_written(Segment& s, uint64_t chunk, const Expect& e, uint64_t source,
                     const void* address) {
  auto& st = s.header(s.rank()).stamps[chunk % uint64_t(s.depth())];
  st.chunk.store(chunk, std::memory_order_relaxed);
  st.bytes.store(e.bytes, std::memory_order_relaxed);
  st.kind.store(uint32_t(e.kind), std::memory_order_relaxed);
  st.call.store(e.call, std::memory_order_relaxed);
  st.source.store(source, std::memory_order_relaxed);
  st.address.store(reinterpret_cast<uint64_t>(address), std::memory_order_relaxed);
  publish(s, &SlotHeader::written, chunk + 1);  // releases the stamp with it
}

uint64_t stamp_source(Segment& s, int rank, uint64_t chunk) {
  return s.header(rank).stamps[chunk % uint64_t(s.depth())].source.load(std::memory_order_relaxed);
}

namespace {
// Where `rank`'s chunk lies for copy_written's loads: staged, or in its symmetric buffer.
const uint8_t* written_data(Segment& s, int rank, uint64_t chunk, const uint8_t* staged,
                            size_t skip, std::shared_ptr<Window>& held, const ErrorContext& where) {
  const uint64_t source = stamp_source(s, rank, chunk);
  if (source == 0) return staged;
  const auto window = uint32_t(source >> 40);
  const size_t offset = size_t(source & ((uint64_t(1) << 40) - 1));
  if (!held || held->id() != window) held = s.windows().get(window);
  if (!held || !held->part(rank)) {
    give_up(s, rank, where,
            "rank " + std::to_string(rank) + "'s input lies in its symmetric buffer #" +
                std::to_string(window) + ", which rank " + std::to_string(s.rank()) +
                " no longer holds (free a symmetric buffer on every rank, after its last call)");
  }
  ++s.direct_reads;
  return held->part(rank) + offset + skip;
}
}  // namespace

void copy_written(Segment& s, int rank, uint64_t chunk, const uint8_t* staged, size_t skip,
                  const ReadInto& to, CopyFn put, std::shared_ptr<Window>& held,
                  const ErrorContext& where) {
  const uint64_t source = stamp_source(s, rank, chunk);
  if (source != kInWriterMemory && source != kChunkInWriterMemory) {
    put(to.dst + to.off, written_data(s, rank, chunk, staged, skip, held, where), to.k);
    return;
  }
  const bool whole = source == kInWriterMemory;
  if (whole && to.off != 0) return;  // the whole block came with the first chunk
  const size_t bytes = whole ? to.bytes : to.k;
  ++s.process_reads;
  const int32_t pid = s.header(rank).pid.load(std::memory_order_relaxed);
  const auto& st = s.header(rank).stamps[chunk % uint64_t(s.depth())];
  auto* from = reinterpret_cast<uint8_t*>(st.address.load(std::memory_order_relaxed)) + skip;
  if (const int err = read_process(pid, whole ? to.dst : to.dst + to.off, from, bytes); err != 0) {
    cross_process_failed(s, rank, pid, bytes, false, err, where);
  }
}

void cross_process_failed(Segment& s, int rank, int32_t pid, size_t bytes, bool write, int err,
                          const ErrorContext& where) {
  const std::string what = "rank " + std::to_string(s.rank()) + " cannot copy " +
                           std::to_string(bytes) + " bytes " + (write ? "into" : "out of") +
                           " rank " + std::to_string(rank) + "'s memory (process " +
                           std::to_string(pid) + ", single copy): " + std::strerror(err);
  ErrorContext w = where;
  w.peer = rank;
  // A peer that is gone is a death the others see for themselves (peer health): abandoning
  // would make them blame this rank instead.
  if (err == ESRCH) throw Error(ErrorCode::peer_failure, w, what + " (that rank is gone)");
  abandon(s, what);
  throw Error(ErrorCode::transport, w, what);
}

bool buffer_free(Segment& s, uint64_t chunk) {
  if (chunk < uint64_t(s.depth())) return true;
  for (int j = 0; j < s.size(); ++j) {
    if (s.header(j).consumed.value.load(std::memory_order_acquire) < chunk + 1 - s.depth()) {
      return false;
    }
  }
  return true;
}

bool written_ready(Segment& s, int rank, uint64_t chunk, const Expect& e) {
  const auto& h = s.header(rank);
  const auto& st = h.stamps[chunk % uint64_t(s.depth())];
  return h.written.value.load(std::memory_order_acquire) > chunk &&
         st.chunk.load(std::memory_order_relaxed) == chunk &&
         st.bytes.load(std::memory_order_relaxed) == e.bytes &&
         st.kind.load(std::memory_order_relaxed) == uint32_t(e.kind) &&
         st.call.load(std::memory_order_relaxed) == e.call;
}

void wait_written(Segment& s, int rank, uint64_t chunk, const Expect& e, Clock::time_point deadline,
                  const ErrorContext& where) {
  wait_counter(s, rank, &SlotHeader::written, chunk + 1, deadline, where, &e);
  const auto& st = s.header(rank).stamps[chunk % uint64_t(s.depth())];
  const Expect theirs = stamp_expect(st);
  const bool stamped = st.chunk.load(std::memory_order_relaxed) == chunk;
  if (stamped && theirs.bytes == e.bytes && theirs.kind == e.kind && theirs.call == e.call) return;
  // Unstamped: the peer's all-to-all round is wider (a call of another size), and only its
  // last chunk carries the stamp: name the call from the latest it published.
  const uint64_t latest = s.header(rank).written.value.load(std::memory_order_acquire) - 1;
  give_up(s, rank, where,
          mismatch(e, rank,
                   stamped ? theirs
                           : stamp_expect(s.header(rank).stamps[latest % uint64_t(s.depth())])));
}

uint32_t call_word(DataType dt, int reduce, int root) {
  return uint32_t(root < 0 ? 0 : (root + 1) & 0xFFFF) << 16 | uint32_t(dt) << 8 |
         uint32_t(reduce < 0 ? 0xFF : reduce & 0xFF);
}

}  // namespace strata::shm
