// UCX's posix shared-memory transport creates /dev/shm/ucx_shm_posix_<id>, fills it, then unlinks
// it (peers open it through /proc/<pid>/fd). A process killed between the two leaves the file
// behind for good, and nothing in it says whose it was. A file of that name that no process holds
// open or mapped can only be such a leftover: when a rank learns that a peer died, it removes them.
#pragma once

namespace strata::ucx {

/// Removes /dev/shm/ucx_shm_posix_* files owned by this user that no process has open or mapped.
/// Returns how many it removed. Does nothing when UCX_POSIX_USE_PROC_LINK=n (then live segments
/// are legitimately held by name only).
int reclaim_stale_files();

}  // namespace strata::ucx
