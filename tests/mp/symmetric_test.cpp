// Symmetric buffers (Communicator::alloc_symmetric): all_gather, all_to_all and broadcast whose
// inputs lie in one are read by the peers where they lie, unstaged; checked element by element
// against values every rank computes, with inputs symmetric on every rank, on one rank only, in
// place, and of sizes that span many chunks; and the refusals: sizes that differ, a part freed
// early.
#include "mp.hpp"
#include "runtime/communicator_impl.hpp"

using namespace strata;

namespace {

// Element i of what rank `from` sends rank `to` (all_gather: to = 0): distinct everywhere.
int32_t value(int from, int to, size_t i) { return int32_t(from * 1000003 + to * 7919 + i); }

uint64_t direct_reads(Communicator& g) {
  shm::Segment* s = runtime::GroupAccess::of(g).segment();
  return s ? s->direct_reads : 0;
}

bool has_segment(Communicator& g) { return runtime::GroupAccess::of(g).segment() != nullptr; }

void fill_all_gather_input(int32_t* in, int rank, size_t count) {
  for (size_t i = 0; i < count; ++i) in[i] = value(rank, 0, i);
}

void expect_all_gathered(const int32_t* out, int n, size_t count) {
  for (int j = 0; j < n; ++j) {
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(out[size_t(j) * count + i], value(j, 0, i)) << "block " << j << " element " << i;
    }
  }
}

}  // namespace

// 37 elements (one chunk), 300,000 (1.2 MB a rank: many chunks and all-to-all rounds) and 0.
TEST(Symmetric, AllGatherAndAllToAllFromSymmetricInputsOnEveryRank) {
  auto g = mp::world().split(0, mp::world().rank());
  const int n = g.size(), r = g.rank();
  for (const size_t count : {size_t(37), size_t(300000), size_t(0)}) {
    SCOPED_TRACE("count " + std::to_string(count));
    SymmetricBuffer in = g.alloc_symmetric(count * n * sizeof(int32_t));
    ASSERT_TRUE(in);
    EXPECT_EQ(in.bytes(), count * n * sizeof(int32_t));
    const uint64_t before = direct_reads(g);
    fill_all_gather_input(in.as<int32_t>(), r, count);
    std::vector<int32_t> out(count * n, -1);
    g.all_gather(Buffer{in.data(), count, DataType::i32}, buffer(out)).wait();
    expect_all_gathered(out.data(), n, count);

    for (int j = 0; j < n; ++j) {
      for (size_t i = 0; i < count; ++i) in.as<int32_t>()[size_t(j) * count + i] = value(r, j, i);
    }
    std::fill(out.begin(), out.end(), -1);
    g.all_to_all(Buffer{in.data(), count * n, DataType::i32}, buffer(out)).wait();
    for (int j = 0; j < n; ++j) {
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(out[size_t(j) * count + i], value(j, r, i)) << "from " << j << " element " << i;
      }
    }
    // Read unstaged: at least one chunk of each collective from each peer.
    if (has_segment(g)) {
      EXPECT_GE(direct_reads(g) - before, uint64_t(2 * (n - 1)));
    }
  }
}

// A broadcast whose root's buffer is symmetric: read where it lies by the others, every chunk;
// in place and out of place (the root's output a plain buffer), each rank the root in turn.
TEST(Symmetric, BroadcastFromASymmetricRootBuffer) {
  auto g = mp::world().split(0, mp::world().rank());
  const int n = g.size(), r = g.rank();
  const size_t count = 300000;  // 1.2 MB: many chunks
  SymmetricBuffer sym = g.alloc_symmetric(count * sizeof(int32_t));
  ASSERT_TRUE(sym);
  for (int root = 0; root < n; ++root) {
    for (const bool in_place : {true, false}) {
      SCOPED_TRACE("root " + std::to_string(root) + (in_place ? " in place" : " out of place"));
      const uint64_t before = direct_reads(g);
      std::vector<int32_t> plain(count, -1);
      int32_t* in = r == root ? sym.as<int32_t>() : plain.data();
      if (r == root) {
        for (size_t i = 0; i < count; ++i) in[i] = value(root, in_place, i);
      }
      const Buffer from{in, count, DataType::i32};
      if (in_place || r != root) {
        g.broadcast(from, root).wait();
      } else {
        g.broadcast(from, buffer(plain), root).wait();
      }
      const int32_t* got = in_place || r != root ? in : plain.data();
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(got[i], value(root, in_place, i)) << "element " << i;
      }
      if (has_segment(g) && r != root) {
        EXPECT_GT(direct_reads(g) - before, 0u) << "staged, not read where it lies";
      }
    }
  }
}

// In place: the input is this rank's block of a symmetric output.
TEST(Symmetric, AllGatherInPlaceInASymmetricOutput) {
  auto g = mp::world().split(0, mp::world().rank());
  const int n = g.size(), r = g.rank();
  const size_t count = 100003;
  SymmetricBuffer out = g.alloc_symmetric(count * n * sizeof(int32_t));
  const uint64_t before = direct_reads(g);
  int32_t* o = out.as<int32_t>();
  for (size_t i = 0; i < count * n; ++i) o[i] = -1;
  fill_all_gather_input(o + size_t(r) * count, r, count);
  g.all_gather(Buffer{o + size_t(r) * count, count, DataType::i32},
               Buffer{o, count * n, DataType::i32})
      .wait();
  expect_all_gathered(o, n, count);
  if (has_segment(g)) {
    EXPECT_GE(direct_reads(g) - before, uint64_t(n - 1));
  }
}

// Only rank 0's input is symmetric: its peers read it unstaged, it reads theirs staged.
TEST(Symmetric, OneRanksSymmetricInputAmongPlainOnes) {
  auto g = mp::world().split(0, mp::world().rank());
  const int n = g.size(), r = g.rank();
  const size_t count = 200000;
  SymmetricBuffer sym = g.alloc_symmetric(count * n * sizeof(int32_t));
  std::vector<int32_t> plain(count * n);
  int32_t* in = r == 0 ? sym.as<int32_t>() : plain.data();
  const uint64_t before = direct_reads(g);
  fill_all_gather_input(in, r, count);
  std::vector<int32_t> out(count * n, -1);
  g.all_gather(Buffer{in, count, DataType::i32}, buffer(out)).wait();
  expect_all_gathered(out.data(), n, count);
  for (int j = 0; j < n; ++j) {
    for (size_t i = 0; i < count; ++i) in[size_t(j) * count + i] = value(r, j, i);
  }
  std::fill(out.begin(), out.end(), -1);
  g.all_to_all(Buffer{in, count * n, DataType::i32}, buffer(out)).wait();
  for (int j = 0; j < n; ++j) {
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(out[size_t(j) * count + i], value(j, r, i)) << "from " << j << " element " << i;
    }
  }
  if (has_segment(g)) {
    // Rank 0 reads nothing unstaged; every other rank reads rank 0's chunks so.
    if (r == 0) {
      EXPECT_EQ(direct_reads(g), before);
    }
    if (r != 0) {
      EXPECT_GE(direct_reads(g) - before, uint64_t(2));
    }
  }
}

TEST(Symmetric, SizesThatDifferFailOnEveryRankNamingARank) {
  auto g = mp::world().split(0, mp::world().rank());
  if (g.size() < 2) GTEST_SKIP() << "needs 2 or more ranks: their sizes differ";
  try {
    g.alloc_symmetric(4096 + size_t(g.rank()));
    ADD_FAILURE() << "sizes that differ were allocated";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("every rank allocates the same"), std::string::npos)
        << e.what();
    EXPECT_GE(e.where().peer, 0) << e.what();
  }
  // Too large on one rank (a stamp's offset has 40 bits): every rank fails, naming it.
  try {
    g.alloc_symmetric(g.rank() == 1 ? size_t(1) << 40 : 4096);
    ADD_FAILURE() << "a 1 TiB symmetric buffer was allocated";
  } catch (const Error& e) {
    if (g.rank() == 1) {
      EXPECT_NE(std::string(e.what()).find("at most"), std::string::npos) << e.what();
    } else {
      EXPECT_EQ(e.where().peer, 1) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank 1 could not make its part"), std::string::npos)
          << e.what();
    }
  }
  // The group goes on: the refusals were agreed, not a mismatch mid-collective.
  std::vector<int32_t> v(8, 1);
  g.all_reduce(buffer(v), ReduceOp::sum).wait();
  EXPECT_EQ(v, std::vector<int32_t>(8, g.size()));
}

// Rank 1 frees its part, then rank 0 passes its own as input: rank 1 cannot read it and fails
// naming the buffer; rank 0, which waits for rank 1 to have read it, fails quoting rank 1.
TEST(Symmetric, APartFreedBeforeItsLastCallFailsTheCallNamingIt) {
  auto g = mp::world().split(0, mp::world().rank());
  if (!has_segment(g)) GTEST_SKIP() << "needs a shared segment (2 or more ranks on one node)";
  const int r = g.rank();
  SymmetricBuffer sym = g.alloc_symmetric(4096);
  if (r == 1) sym = SymmetricBuffer();
  std::vector<int32_t> plain(1024), out(1024 * size_t(g.size()));
  for (size_t i = 0; i < plain.size(); ++i) plain[i] = int32_t(1000 * r + i);
  if (r == 0) std::fill_n(static_cast<int32_t*>(sym.data()), 1024, 7);
  Buffer in = r == 0 ? Buffer{sym.data(), 1024, DataType::i32} : buffer(plain);
  Work w = g.all_gather(in, buffer(out));
  if (r <= 1) {
    try {
      w.wait();
      ADD_FAILURE() << "a freed part was read";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("symmetric buffer #1, which rank 1 no longer holds"),
                std::string::npos)
          << e.what();
    }
  } else {
    // Rank 0's and rank 1's chunks were both published before rank 1 failed: the call may
    // complete, with every block right, or fail quoting rank 1.
    try {
      w.wait();
      for (int j = 0; j < g.size(); ++j)
        for (size_t i = 0; i < 1024; ++i)
          ASSERT_EQ(out[size_t(j) * 1024 + i], j == 0 ? 7 : int32_t(1000 * j + i))
              << "block " << j << " element " << i;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    }
  }
}

// all_to_allv with uneven counts (rank i sends rank j (i + 2j) % 5 * 30011 + 7 elements, some
// large enough for many rounds), input blocks in reverse order with gaps between them: every rank
// symmetric, then rank 0 only.
TEST(Symmetric, AllToAllvFromSymmetricInputs) {
  auto g = mp::world().split(0, mp::world().rank());
  const int n = g.size(), r = g.rank();
  auto count = [](int i, int j) { return size_t((i + 2 * j) % 5) * 30011 + 7; };
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t in_len = 0, out_len = 0;
  for (int j = n - 1; j >= 0; --j) sd[j] = in_len, in_len += count(r, j) + 3;  // reversed, gaps
  for (int j = 0; j < n; ++j)
    sc[j] = count(r, j), rc[j] = count(j, r), rd[j] = out_len, out_len += rc[j];
  size_t longest = 0;  // every rank allocates the same: the longest input
  for (int i = 0; i < n; ++i) {
    size_t len = 0;
    for (int j = 0; j < n; ++j) len += count(i, j) + 3;
    longest = std::max(longest, len);
  }
  SymmetricBuffer sym = g.alloc_symmetric(longest * sizeof(int32_t));
  std::vector<int32_t> plain(in_len);
  for (const bool everyone : {true, false}) {
    SCOPED_TRACE(everyone ? "every rank symmetric" : "rank 0 symmetric");
    int32_t* in = everyone || r == 0 ? sym.as<int32_t>() : plain.data();
    for (int j = 0; j < n; ++j) {
      for (size_t i = 0; i < sc[j]; ++i) in[sd[j] + i] = value(r, j, i);
    }
    const uint64_t before = direct_reads(g);
    std::vector<int32_t> out(out_len, -1);
    g.all_to_allv(Buffer{in, in_len, DataType::i32}, sc, sd, buffer(out), rc, rd).wait();
    for (int j = 0; j < n; ++j) {
      for (size_t i = 0; i < rc[j]; ++i) {
        ASSERT_EQ(out[rd[j] + i], value(j, r, i)) << "from " << j << " element " << i;
      }
    }
    if (has_segment(g) && (everyone || r != 0)) {
      EXPECT_GE(direct_reads(g) - before, uint64_t(everyone ? n - 1 : 1));
    }
  }
}
