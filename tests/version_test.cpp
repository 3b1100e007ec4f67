// strata::library_versions() reads the loaded libraries; here they are the ones the build saw, so
// each must equal what that library's own header says at compile time.
#include "strata/version.hpp"

#include <gtest/gtest.h>
#include <hwloc.h>
#include <libxml/xmlversion.h>
#include <mpi.h>
#include <ucp/api/ucp_version.h>

#include <string>

#define STR2(x) #x
#define STR(x) STR2(x)

TEST(Version, EveryLibraryAsItsHeaderSays) {
  const auto v = strata::library_versions();
  ASSERT_EQ(v.size(), 5u);
  EXPECT_EQ(v[0].first, "Strata");
  EXPECT_EQ(v[0].second, strata::version());
  EXPECT_EQ(v[0].second, STRATA_TEST_PROJECT_VERSION);
  EXPECT_EQ(v[1].first, "MPI");
#ifdef OMPI_MAJOR_VERSION
  EXPECT_EQ(v[1].second, "Open MPI v" STR(OMPI_MAJOR_VERSION) "." STR(OMPI_MINOR_VERSION) "." STR(
                             OMPI_RELEASE_VERSION));
#endif
  EXPECT_EQ(v[2].first, "UCX");
  EXPECT_EQ(v[2].second.rfind(STR(UCP_API_MAJOR) "." STR(UCP_API_MINOR) ".", 0), 0u) << v[2].second;
  EXPECT_EQ(v[3], (std::pair<std::string, std::string>{"hwloc", HWLOC_VERSION}));
  EXPECT_EQ(v[4], (std::pair<std::string, std::string>{"libxml2", LIBXML_DOTTED_VERSION}));
}
