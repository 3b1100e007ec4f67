// Mesh over real communicators: every group's membership and order match the shape's, a sum over
// each group adds exactly its members, and on emulated nodes TP stays inside a node.
#include <cstdlib>
#include <numeric>

#include "mp.hpp"

using namespace strata;

namespace {

constexpr Dim kDims[] = {Dim::tp, Dim::cp, Dim::ep, Dim::dp, Dim::pp};

// World ranks of `g`'s members in group-rank order, gathered over `g` itself.
std::vector<int32_t> members(Communicator& g) {
  std::vector<int32_t> mine = {mp::world().rank()}, all(size_t(g.size()));
  g.all_gather(buffer(mine), buffer(all)).wait();
  return all;
}

void check_group(Mesh& m, Communicator& g, std::initializer_list<Dim> dims) {
  const std::vector<int> want = m.group_ranks(dims);
  const std::vector<int32_t> got = members(g);
  ASSERT_EQ(std::vector<int>(got.begin(), got.end()), want) << g.name();
  // A sum over the group: the members' world ranks, nobody else's.
  std::vector<int64_t> v = {mp::world().rank()};
  g.all_reduce(buffer(v), ReduceOp::sum).wait();
  int64_t sum = 0;
  for (int r : want) sum += r;
  EXPECT_EQ(v[0], sum) << g.name();
}

int ranks_per_emulated_node() {
  const char* v = std::getenv("STRATA_TEST_RANKS_PER_NODE");
  return v ? std::atoi(v) : 0;
}

}  // namespace

TEST(Mesh, GroupsMatchTheShapeOnEveryDimension) {
  auto& w = mp::world();
  const int k = ranks_per_emulated_node();
  const std::vector<MeshShape> shapes = {
      {.tp = 2, .pp = 2}, {.tp = 4}, {.pp = 4}, {.tp = 2, .cp = 2, .ep = 2},
      {.cp = 2, .pp = 2}, {.tp = 2}, {}};  // the last two: every even world, every world (all dp)
  int tried = 0;
  for (const MeshShape& s : shapes) {
    if (w.size() % (s.tp * s.cp * s.ep * s.pp) != 0) continue;
    if (k > 0 && (k % s.tp != 0)) continue;  // would put TP across emulated nodes
    ++tried;
    Mesh m = Mesh::create(w, s);
    const MeshShape& r = m.shape();
    EXPECT_EQ(r.tp * r.cp * r.ep * r.dp * r.pp, w.size());
    for (Dim d : kDims) {
      Communicator& g = m.group(d);
      EXPECT_EQ(g.size(), r[d]) << dim_name(d);
      EXPECT_EQ(g.rank(), m.coord(d)) << dim_name(d);
      check_group(m, g, {d});
    }
    check_group(m, m.group({Dim::dp, Dim::cp}), {Dim::dp, Dim::cp});
    check_group(m, m.group({Dim::tp, Dim::pp}), {Dim::tp, Dim::pp});
  }
  EXPECT_GE(tried, 1);  // all dp fits any world
  if (w.size() >= 4 && w.size() % 4 == 0) {
    EXPECT_GE(tried, 4);
  }
}

TEST(Mesh, TpGroupsLandInsideANode) {
  auto& w = mp::world();
  // Node sizes: k, ..., k, and the rest (or the whole world on one node).
  const int k = ranks_per_emulated_node() > 0 ? ranks_per_emulated_node() : w.size();
  const int tp = std::gcd(k, w.size() % k == 0 ? k : w.size() % k);
  Mesh m = Mesh::create(w, MeshShape{.tp = tp});
  const JobTopology& job = m.topology();
  for (int r : m.group_ranks({Dim::tp}))
    EXPECT_EQ(job.ranks[size_t(r)].node_id, job.ranks[size_t(w.rank())].node_id);
  EXPECT_EQ(m.group(Dim::dp).size(), w.size() / tp);
  // Larger than a node: every rank refuses it with the same message, nobody hangs.
  if (w.size() % (2 * k) == 0) {
    try {
      Mesh::create(w, MeshShape{.tp = 2 * k});
      ADD_FAILURE() << "a TP group across nodes was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("larger than a node"), std::string::npos) << e.what();
    }
  }
}
