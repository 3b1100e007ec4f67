// Arguments only the root can check (a root's buffers, by the library or by a binding that
// converts them first): the root's call throws, and every other rank fails naming it and why, at
// once, instead of waiting for it until STRATA_TIMEOUT.
#include <chrono>
#include <string>
#include <vector>

#include "mp.hpp"

using namespace strata;

// Arguments only the root can check (its buffers): the root's call throws, and every other rank
// fails naming it, at once, instead of waiting for it until STRATA_TIMEOUT (issue 22). Gather's
// non-roots only send, so they may finish first; their next call on the group fails instead.
TEST(RootArguments, ARefusedRootFailsEveryRankNamingIt) {
  auto& w = mp::world();
  if (w.size() < 2) {
    GTEST_SKIP() << "needs 2 ranks: a root that refuses, and another rank its refusal must fail "
                    "(mp_np1 runs this suite on one)";
  }
  for (const std::string op : {"scatter", "broadcast", "gather"}) {
    SCOPED_TRACE(op);
    Communicator c = w.split(0, w.rank());
    const bool root = c.rank() == 0;
    const size_t n = size_t(c.size());
    std::vector<float> small(3), block(4), all(4 * n);
    const auto t0 = Clock::now();
    try {
      if (op == "scatter") c.scatter(root ? buffer(small) : buffer(all), buffer(block), 0).wait();
      if (op == "broadcast") {
        c.broadcast(root ? buffer(small) : buffer(block), buffer(block), 0).wait();
      }
      if (op == "gather") {
        c.gather(buffer(block), root ? buffer(small) : buffer(all), 0).wait();
        if (!root) c.barrier().wait();  // a sender may have finished: the group is unusable
      }
      ADD_FAILURE() << "no error on rank " << c.rank();
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(int(e.code()), int(ErrorCode::invalid_argument)) << m;
      if (root) {
        EXPECT_NE(m.find(op + " failed on rank 0"), std::string::npos) << m;
        EXPECT_NE(
            m.find(op == "broadcast" ? "output has 4 elements, expected 3" : "has 3 elements"),
            std::string::npos)
            << m;
      } else {
        EXPECT_NE(m.find("rank 0 refused its own arguments to " + op + "(f32)"), std::string::npos)
            << m;
        // ... and why, in the root's words.
        EXPECT_NE(
            m.find(op == "broadcast" ? "(output has 4 elements, expected 3" : "has 3 elements"),
            std::string::npos)
            << m;
        EXPECT_EQ(e.where().peer, 0) << m;
      }
    }
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10)) << "STRATA_TIMEOUT is 120 s here";
  }
}

// refuse_root_call: a caller's own check of the root's arguments (a binding's conversion) fails
// the others as the library's do, with the caller's reason; reduce's carries its operation.
TEST(RootArguments, ACallersRefusalFailsEveryRankNamingIt) {
  auto& w = mp::world();
  if (w.size() < 2) GTEST_SKIP() << "needs 2 ranks (mp_np1 runs this suite on one)";
  for (const std::string op : {"scatter", "reduce"}) {
    SCOPED_TRACE(op);
    Communicator c = w.split(0, w.rank());
    std::vector<float> block(4), all(4 * size_t(c.size()));
    const auto t0 = Clock::now();
    try {
      if (c.rank() == 0) {
        c.refuse_root_call(op, 0, buffer(block), ReduceOp::max, "output is read-only");
      } else if (op == "scatter") {
        c.scatter(buffer(all), buffer(block), 0).wait();
      } else {
        c.reduce(buffer(block), buffer(all), ReduceOp::max, 0).wait();
        c.barrier().wait();  // a reduce's senders may finish first, as a gather's
      }
      ADD_FAILURE() << "no error on rank " << c.rank();
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(int(e.code()), int(ErrorCode::invalid_argument)) << m;
      const std::string call = op == "reduce" ? "reduce(f32, max)" : "scatter(f32)";
      if (c.rank() == 0) {
        EXPECT_NE(m.find(op + " failed on rank 0"), std::string::npos) << m;
      } else {
        EXPECT_NE(m.find("rank 0 refused its own arguments to " + call), std::string::npos) << m;
        EXPECT_EQ(e.where().peer, 0) << m;
      }
      EXPECT_NE(m.find("output is read-only"), std::string::npos) << m;
    }
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10)) << "STRATA_TIMEOUT is 120 s here";
  }
  try {
    w.refuse_root_call("all_reduce", 0, {}, ReduceOp::sum, "why");
    ADD_FAILURE() << "all_reduce refused as if rooted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("all_reduce is not a rooted collective"),
              std::string::npos)
        << e.what();
  }
}
