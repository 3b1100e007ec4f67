#include "collectives/shm_sync.hpp"

#include <immintrin.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

#include "spin_policy.hpp"

namespace strata::coll::shm_sync {
namespace {

// The futex word is the low 32 bits of the 64-bit counter (little-endian x86-64).
uint32_t* futex_word(strata::shm::Counter& c) { return reinterpret_cast<uint32_t*>(&c.value); }

void futex_wait(strata::shm::Counter& c, uint32_t seen, std::chrono::milliseconds max) {
  timespec ts{long(max.count() / 1000), long(max.count() % 1000) * 1000000};
  // Shared (not FUTEX_PRIVATE) because the word lives in memory mapped by several processes.
  syscall(SYS_futex, futex_word(c), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

}  // namespace

const char* kind_name(uint32_t k) {
  switch (Kind(k)) {
    case Kind::all_reduce: return "all_reduce";
    case Kind::reduce_scatter: return "reduce_scatter";
    case Kind::all_gather: return "all_gather";
    case Kind::all_to_all: return "all_to_all";
    case Kind::broadcast: return "broadcast";
  }
  return "unknown collective";
}

void publish(strata::shm::Segment& s, Field f, uint64_t value) {
  auto& c = s.header(s.rank()).*f;
  c.value.store(value, std::memory_order_seq_cst);
  if (c.waiters.load(std::memory_order_seq_cst) > 0) {
    syscall(SYS_futex, futex_word(c), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  }
}

void wait_for(strata::shm::Segment& s, int rank, Field f, uint64_t value,
              Clock::time_point deadline, const ErrorContext& where) {
  auto& c = s.header(rank).*f;
  // Most waits end within a few hundred nanoseconds: poll before paying for a clock read.
  for (int i = 0; i < 64; ++i) {
    if (c.value.load(std::memory_order_acquire) >= value) return;
    _mm_pause();
  }
  const auto spin_until = Clock::now() + spin_budget(s.oversubscribed());
  do {
    for (int i = 0; i < 32; ++i) {
      if (c.value.load(std::memory_order_acquire) >= value) return;
      _mm_pause();
    }
  } while (Clock::now() < spin_until);
  if (s.oversubscribed()) {
    // More ranks than cores: the rank we wait for may be queued behind us on our core. Yielding
    // hands it the core at once, where a futex sleep would cost a wake-up (~250 us here); bounded
    // so that a long wait does not turn into a system-call storm.
    const auto yield_until = Clock::now() + kOversubscribedYield;
    while (Clock::now() < yield_until) {
      if (c.value.load(std::memory_order_acquire) >= value) return;
      sched_yield();
    }
  }
  for (;;) {
    // Asleep, a dead peer would only show at the deadline: ask whether one has died, or whether
    // the peer has abandoned this collective.
    if (s.watchdog()) s.watchdog()->check(where);
    if (s.header(rank).gave_up.load(std::memory_order_acquire)) {
      ErrorContext w = where;
      w.peer = rank;
      throw Error(ErrorCode::peer_failure, w,
                  "rank " + std::to_string(rank) +
                      " abandoned this collective (see its error: the ranks disagree on it)");
    }
    // Announce the sleep, then look once more: publish() stores before it reads `waiters`, so
    // either it sees us or we see its value.
    c.waiters.fetch_add(1, std::memory_order_seq_cst);
    uint64_t seen = c.value.load(std::memory_order_seq_cst);
    if (seen < value) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() > 0) futex_wait(c, uint32_t(seen), std::min(left, std::chrono::milliseconds(100)));
    }
    c.waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (c.value.load(std::memory_order_acquire) >= value) return;
    if (Clock::now() >= deadline) {
      ErrorContext w = where;
      w.peer = rank;
      throw Error(ErrorCode::timeout, w,
                  "timed out in the shared-memory path waiting for peer " + std::to_string(rank) +
                      " (STRATA_TIMEOUT; is that rank alive and in the same collective?)");
    }
  }
}

void publish_written(strata::shm::Segment& s, uint64_t chunk, const Expect& e) {
  auto& st = s.header(s.rank()).stamps[chunk % uint64_t(s.depth())];
  st.chunk.store(chunk, std::memory_order_relaxed);
  st.bytes.store(e.bytes, std::memory_order_relaxed);
  st.kind.store(uint32_t(e.kind), std::memory_order_relaxed);
  publish(s, &strata::shm::SlotHeader::written, chunk + 1);  // releases the stamp with it
}

void wait_written(strata::shm::Segment& s, int rank, uint64_t chunk, const Expect& e,
                  Clock::time_point deadline, const ErrorContext& where) {
  wait_for(s, rank, &strata::shm::SlotHeader::written, chunk + 1, deadline, where);
  const auto& st = s.header(rank).stamps[chunk % uint64_t(s.depth())];
  const uint64_t bytes = st.bytes.load(std::memory_order_relaxed);
  const uint32_t kind = st.kind.load(std::memory_order_relaxed);
  if (bytes == e.bytes && kind == uint32_t(e.kind) &&
      st.chunk.load(std::memory_order_relaxed) == chunk) {
    return;
  }
  s.header(s.rank()).gave_up.store(1, std::memory_order_release);
  ErrorContext w = where;
  w.peer = rank;
  throw Error(ErrorCode::peer_failure, w,
              "size mismatch: this rank is in " + std::string(kind_name(uint32_t(e.kind))) +
                  " of " + std::to_string(e.bytes) + " bytes per rank, rank " +
                  std::to_string(rank) + " in " + kind_name(kind) + " of " +
                  std::to_string(bytes) + " bytes (do the ranks pass the same counts and dtypes?)");
}

}  // namespace strata::coll::shm_sync
