// The one error type of Strata. Its message always says where the failure happened.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace strata {

/// What kind of failure an Error reports, so callers can react without parsing text.
enum class ErrorCode : uint8_t {
  invalid_argument,  ///< rejected before any byte moved
  timeout,           ///< a deadline passed
  peer_failure,      ///< a peer died, closed its connection or sent something unexpected
  transport,         ///< UCX / NCCL / socket failure
  aborted,           ///< Communicator::abort() ended the operation
  internal,          ///< a bug in Strata
};

/// Where an error happened. Fields that do not apply stay at their defaults and are not printed.
struct ErrorContext {
  int rank = -1;      ///< this process's rank in the group
  std::string group;  ///< the communicator's name ("world", "world/split0.c1", ...)
  std::string op;     ///< operation name ("all_reduce", "store.get", ...)
  int64_t seq = -1;   ///< the operation's sequence number on that communicator
  int peer = -1;      ///< the peer involved, as a rank in the group
};

/// Thrown by every Strata call that fails. what() reads like:
/// "strata: all_reduce failed on rank 2 of group world (seq 17, peer 3): timed out after 300 s ..."
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const ErrorContext& where, const std::string& what);
  ErrorCode code() const { return code_; }
  const ErrorContext& where() const { return where_; }

 private:
  ErrorCode code_;
  ErrorContext where_;
};

}  // namespace strata
