// A rank's memory of its last calls (src/transport/calls/call_history.hpp): what it answers a peer
// that asks about a sequence number.
#include "transport/calls/call_history.hpp"

#include <gtest/gtest.h>

#include "strata/types.hpp"

namespace t = strata::transport;

namespace {
t::Call call(int root) { return {t::call_bits("broadcast", strata::DataType::f32, -1), root, 4}; }
}  // namespace

TEST(CallHistory, AnswersWithTheCallAtTheAskedSequenceNumber) {
  t::CallHistory h;
  EXPECT_EQ(h.answer({0}).began, 0) << "nothing begun yet";
  EXPECT_EQ(h.answer({0}).known, 0);
  for (uint64_t seq = 0; seq < 40; ++seq) h.began(seq, call(int(seq)));
  const t::CallAnswer a = h.answer({35});
  EXPECT_EQ(a.seq, 35u);
  EXPECT_EQ(a.latest, 39u);
  EXPECT_EQ(a.began, 1);
  ASSERT_EQ(a.known, 1);
  EXPECT_EQ(a.call.root, 35);
  EXPECT_EQ(a.call.count, 4);
  // Older than its depth, or not begun yet: unknown, never another call's record.
  EXPECT_EQ(h.answer({39 - t::CallHistory::kDepth}).known, 0);
  EXPECT_EQ(h.answer({40}).known, 0);
  EXPECT_EQ(h.answer({40 + t::CallHistory::kDepth}).known, 0);
  EXPECT_TRUE(h.at(39 - t::CallHistory::kDepth + 1).has_value());
}

TEST(CallHistory, BeginningACallAgainReplacesItsRecord) {
  t::CallHistory h;
  h.began(7, call(0));
  h.began(7, call(2));  // STRATA_CHECK's exchange, then the call itself
  ASSERT_TRUE(h.at(7));
  EXPECT_EQ(h.at(7)->root, 2);
}
