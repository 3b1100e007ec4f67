// The flight recorder on its own: the ring keeps the newest records, states and errors show, and
// SIGUSR1 writes every live recorder to STRATA_DUMP_DIR.
#include "runtime/flight_recorder.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
using strata::runtime::FlightRecorder;

// The fields of the first table row that mentions `op`.
std::vector<std::string> row(const std::string& table, const std::string& op) {
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || line.find(" " + op + " ") == std::string::npos) continue;
    std::istringstream l(line);
    std::vector<std::string> f;
    for (std::string x; l >> x;) f.push_back(x);
    return f;
  }
  return {};
}
using Fields = std::vector<std::string>;

strata::ErrorContext at(int64_t seq, const char* op, int peer = -1) {
  return strata::ErrorContext{3, "world/tp", op, seq, peer};
}

TEST(FlightRecorderUnit, KeepsTheNewestAndShowsStatesAndErrors) {
  FlightRecorder r(2);
  const uint64_t a = r.queued(at(0, "all_reduce"), true, strata::DataType::f32, 8);
  const uint64_t b = r.queued(at(0, "send", 5), false, strata::DataType::bf16, 16);
  const uint64_t c = r.queued(at(1, "all_gather"), true, strata::DataType::f64, 2);
  r.started(a);  // overwritten: ignored
  r.ended(a);
  r.started(b);
  r.ended(b, "strata: send failed on rank 3\nsecond line");
  r.started(c);
  const std::string t = r.dump("test");
  EXPECT_NE(t.find("rank 3 of group world/tp (test), last 2 of 3 operations"), std::string::npos)
      << t;
  EXPECT_EQ(t.find("all_reduce"), std::string::npos) << t;
  const size_t send = t.find("send"), gather = t.find("all_gather");
  ASSERT_NE(send, std::string::npos);
  ASSERT_NE(gather, std::string::npos);
  EXPECT_LT(send, gather) << "oldest first";
  const Fields f = row(t, "send");
  ASSERT_GE(f.size(), 7u) << t;
  EXPECT_EQ(Fields(f.begin(), f.begin() + 7),
            (Fields{"0", "p2p", "send", "bf16", "16", "5", "FAILED"}));
  EXPECT_NE(t.find("strata: send failed on rank 3"), std::string::npos);
  EXPECT_EQ(t.find("second line"), std::string::npos) << "first line of the error only";
  const Fields g = row(t, "all_gather");
  ASSERT_GE(g.size(), 7u) << t;
  EXPECT_EQ(Fields(g.begin(), g.begin() + 7),
            (Fields{"1", "coll", "all_gather", "f64", "2", "-1", "running"}));
}

// The immediate path's records: one begun in the issuing call and finished by the engine
// (running, then ended) and one completed in the call.
TEST(FlightRecorderUnit, RecordsStartedOrCompletedInTheIssuingCall) {
  FlightRecorder r(4);
  const auto t0 = strata::Clock::now();
  const uint64_t a = r.running(at(7, "all_reduce"), true, strata::DataType::f32, 2, t0);
  r.completed(at(8, "broadcast"), strata::DataType::u8, 64, t0);
  std::string t = r.dump("test");
  Fields f = row(t, "all_reduce");
  ASSERT_GE(f.size(), 7u) << t;
  EXPECT_EQ(Fields(f.begin(), f.begin() + 7),
            (Fields{"7", "coll", "all_reduce", "f32", "2", "-1", "running"}));
  f = row(t, "broadcast");
  ASSERT_GE(f.size(), 7u) << t;
  EXPECT_EQ(Fields(f.begin(), f.begin() + 7),
            (Fields{"8", "coll", "broadcast", "u8", "64", "-1", "done"}));
  r.ended(a, "", t0);
  f = row(r.dump("test"), "all_reduce");
  ASSERT_GE(f.size(), 7u);
  EXPECT_EQ(f[6], "done");
}

TEST(FlightRecorderUnit, Sigusr1WritesEveryLiveRecorderToTheDumpDir) {
  const fs::path dir = fs::path(testing::TempDir()) / "strata_flight_dump";
  fs::remove_all(dir);
  fs::create_directories(dir);
  ::setenv("STRATA_DUMP_DIR", dir.c_str(), 1);  // before anything reads the configuration
  FlightRecorder r(8);
  r.queued(at(41, "reduce_scatter"), true, strata::DataType::f32, 1024);
  strata::runtime::register_recorder(&r);
  ::raise(SIGUSR1);
  const fs::path file = dir / "strata-flight-world_tp-rank3.txt";
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string text;
  while (std::chrono::steady_clock::now() < until) {
    std::ifstream f(file);
    std::stringstream s;
    s << f.rdbuf();
    text = s.str();
    if (text.find("reduce_scatter") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  strata::runtime::unregister_recorder(&r);
  EXPECT_NE(text.find("(SIGUSR1)"), std::string::npos) << file << ": " << text;
  const Fields f = row(text, "reduce_scatter");
  ASSERT_GE(f.size(), 7u) << text;
  EXPECT_EQ(Fields(f.begin(), f.begin() + 7),
            (Fields{"41", "coll", "reduce_scatter", "f32", "1024", "-1", "queued"}));
  fs::remove_all(dir);
}

}  // namespace
