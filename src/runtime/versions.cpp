#include <hwloc.h>
#include <libxml/parser.h>
#include <mpi.h>
#include <ucp/api/ucp.h>

#include <cstdlib>
#include <string>

#include "strata/version.hpp"

namespace strata {

std::string version() { return STRATA_VERSION_STRING; }

std::vector<std::pair<std::string, std::string>> library_versions() {
  // MPI_Get_library_version may be called before MPI_Init; its text runs on ("..., package: ...,
  // ident: ..."): the part before the first comma names the library and its version.
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  std::string mpi_text = MPI_Get_library_version(mpi, &len) == MPI_SUCCESS ? mpi : "unknown";
  mpi_text = mpi_text.substr(0, mpi_text.find_first_of(",\n"));
  // hwloc tells its API version at run time (0xMMmmrr, unchanged by releases that keep the
  // API), its release only at build time.
  const unsigned h = hwloc_get_api_version();
  std::string hwloc = HWLOC_VERSION;
  if (h != HWLOC_API_VERSION)
    hwloc = "API " + std::to_string(h >> 16) + "." + std::to_string((h >> 8) & 0xff) +
            " (built against " + hwloc + ")";
  // xmlParserVersion is the loaded library's "21004" for 2.10.4.
  const int x = std::atoi(xmlParserVersion);
  const std::string xml = std::to_string(x / 10000) + "." + std::to_string(x / 100 % 100) + "." +
                          std::to_string(x % 100);
  return {{"Strata", version()},
          {"MPI", mpi_text},
          {"UCX", ucp_get_version_string()},
          {"hwloc", hwloc},
          {"libxml2", xml}};
}

}  // namespace strata
