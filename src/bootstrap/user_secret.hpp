// A secret of this user's, kept in a file only the user can read: what a launcher that carries
// no secret (torchrun, Slurm) mixes into the job token it derives, so that another user on the
// machine, who can read a job's address, port and size (or its Slurm ids) from the process
// table, cannot compute the token (docs/architecture.md, "How jobs are told apart").
#pragma once

#include <string>

namespace strata::bootstrap {

/// The secret in $XDG_CACHE_HOME/strata/job-secret (else ~/.cache/strata/job-secret), created
/// on first use (32 hex digits from /dev/urandom, mode 0600, in a directory of mode 0700; two
/// ranks creating it at once get the same one). Throws Error(invalid_argument) naming the file
/// when it is not a regular file of this user that only this user can read or write.
std::string user_secret();

}  // namespace strata::bootstrap
