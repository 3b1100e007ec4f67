// The flight recorder: every operation of a communicator in issue order with its dtype, count,
// peer or root and state; a collective a rank never joined shows as the failed one, by sequence
// number, on the ranks that waited for it.
#include <sstream>

#include "mp.hpp"

using namespace strata;

namespace {

// The table's data rows (header lines start with '#').
std::vector<std::string> rows(const std::string& table) {
  std::vector<std::string> out;
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') out.push_back(line);
  return out;
}

std::vector<std::string> fields(const std::string& row) {
  std::istringstream in(row);
  std::vector<std::string> out;
  for (std::string f; in >> f;) out.push_back(f);
  return out;
}

}  // namespace

TEST(FlightRecorder, ListsEveryOperationInIssueOrder) {
  auto& w = mp::world();
  Communicator c = w.split(0, w.rank());
  std::vector<float> f(10, 1.0f);
  std::vector<int32_t> i(3, 7);
  c.all_reduce(buffer(f), ReduceOp::sum).wait();
  c.barrier().wait();
  c.broadcast(buffer(i), 0).wait();
  const std::string table = c.flight_record();
  const auto r = rows(table);
  ASSERT_EQ(r.size(), 4u) << table;
  // seq kind op dtype count peer state ...; seq 0 is split's own barrier.
  const std::vector<std::vector<std::string>> want = {
      {"0", "coll", "barrier", "-", "0", "-1", "done"},
      {"1", "coll", "all_reduce", "f32", "10", "-1", "done"},
      {"2", "coll", "barrier", "-", "0", "-1", "done"},
      {"3", "coll", "broadcast", "i32", "3", "0", "done"}};
  for (size_t k = 0; k < want.size(); ++k) {
    const auto got = fields(r[k]);
    ASSERT_GE(got.size(), 7u) << r[k];
    EXPECT_EQ(std::vector<std::string>(got.begin(), got.begin() + 7), want[k]) << table;
  }
  EXPECT_NE(table.find("rank " + std::to_string(w.rank()) + " of group " + c.name()),
            std::string::npos)
      << table;
}

TEST(FlightRecorder, KeepsOnlyTheLastOperations) {
  auto& w = mp::world();
  Communicator c = w.split(0, w.rank());
  for (int k = 0; k < 200; ++k) c.barrier().wait();  // seq 1..200 after split's seq 0
  const auto r = rows(c.flight_record());
  ASSERT_EQ(r.size(), 128u);  // STRATA_FLIGHT_RECORDER's default
  EXPECT_EQ(fields(r.front())[0], "73");
  EXPECT_EQ(fields(r.back())[0], "200");
}

TEST(FlightRecorder, ACollectiveOneRankSkippedIsTheFailedRowOnTheOthers) {
  auto& w = mp::world();
  if (w.size() < 2) GTEST_SKIP() << "needs a second rank to be missing";
  CommOptions o;
  o.timeout = std::chrono::milliseconds(1500);
  Communicator c = w.split(0, w.rank(), o);
  std::vector<float> f(4, 1.0f);
  c.all_reduce(buffer(f), ReduceOp::sum).wait();  // seq 1 (0 is split's barrier): everyone
  const bool skipper = w.rank() == w.size() - 1;
  if (!skipper) {
    EXPECT_THROW(c.all_reduce(buffer(f), ReduceOp::sum).wait(), Error);  // seq 2: not the last
    const auto r = rows(c.flight_record());
    ASSERT_EQ(r.size(), 3u);
    EXPECT_EQ(fields(r[1])[6], "done");
    const auto failed = fields(r[2]);
    EXPECT_EQ(failed[0], "2");
    EXPECT_EQ(failed[2], "all_reduce");
    EXPECT_EQ(failed[6], "FAILED");
    EXPECT_NE(r[2].find("timed out"), std::string::npos) << r[2];
  }
  w.barrier().wait();  // the skipper waits here until the others have seen their timeout
}
