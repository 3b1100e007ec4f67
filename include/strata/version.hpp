// What Strata is and what it runs on, for reports and bug tickets (as NCCL prints its version
// and torch.__config__.show() lists its libraries).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace strata {

/// Strata's version, "major.minor.patch".
std::string version();

/// {name, version} of Strata and of each library it runs on, in this order: Strata, MPI (the
/// library's own words, e.g. "Open MPI v4.1.4"), UCX, hwloc, libxml2. Read from the libraries
/// loaded in this process, so a system library swapped under a build shows its own version.
std::vector<std::pair<std::string, std::string>> library_versions();

}  // namespace strata
