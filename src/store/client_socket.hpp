// The store client's socket I/O: whole messages over one non-blocking socket, every wait bounded
// by poll() and a deadline, so that no store call outlives its timeout.
#pragma once

#include <cstddef>
#include <cstdint>

#include "strata/types.hpp"  // Clock

namespace strata::store {

enum class Io { done, timeout, closed, failed };

/// poll() on `fd` until `deadline`; returns its revents, 0 when the deadline passed.
short wait_for(int fd, short events, Clock::time_point deadline);
/// Sends all `n` bytes; a failure leaves its errno in `err` (a reset or broken pipe: closed).
Io send_all(int fd, const uint8_t* p, size_t n, Clock::time_point deadline, int& err);
/// Receives exactly `n` bytes; a failure leaves its errno in `err` (end of stream: closed).
Io recv_exact(int fd, uint8_t* p, size_t n, Clock::time_point deadline, int& err);
/// True when a connected TCP socket's two ends are the same address and port: a client whose
/// ephemeral port happened to be the server's port, connecting before the server listens,
/// "connects" to itself (TCP simultaneous open) and would read its own requests back.
bool connected_to_itself(int fd);

}  // namespace strata::store
