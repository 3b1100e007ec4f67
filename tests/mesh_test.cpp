// Mesh without communicators: Megatron's rank order against its documented example and an
// independent stride formula, shape errors, checks against a job topology, proposed layouts.
#include "strata/mesh.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "strata/error.hpp"
#include "tests/expect_error.hpp"

using namespace strata;
using testing_errors::expect_invalid;

namespace {

using Groups = std::vector<std::vector<int>>;

// Every distinct group along `dims`, in order of their first rank.
Groups all_groups(const MeshShape& s, int world, std::initializer_list<Dim> dims) {
  Groups out;
  for (int r = 0; r < world; ++r) {
    std::vector<int> g = s.group(r, dims);
    EXPECT_NE(std::find(g.begin(), g.end(), r), g.end()) << "rank " << r << " not in its group";
    if (g.front() == r) out.push_back(g);
  }
  return out;
}

// The reference: a dimension's group is an arithmetic progression of world ranks whose stride
// is the product of the faster dimensions (tp, then cp, ep, dp, pp).
std::vector<int> strided(const MeshShape& s, int r, Dim d) {
  const Dim order[] = {Dim::tp, Dim::cp, Dim::ep, Dim::dp, Dim::pp};
  int stride = 1;
  for (Dim o : order) {
    if (o == d) break;
    stride *= s[o];
  }
  const int coord = (r / stride) % s[d];
  std::vector<int> g;
  for (int i = 0; i < s[d]; ++i) g.push_back(r + (i - coord) * stride);
  return g;
}

// A job of CPU-only nodes holding `per_node[i]` ranks each, ranks numbered node by node.
JobTopology cpu_job(const std::vector<int>& per_node) {
  std::vector<NodeTopology> nodes;
  std::vector<RankPlacement> ranks;
  int rank = 0;
  for (size_t n = 0; n < per_node.size(); ++n) {
    NodeTopology node;
    node.id = "node" + std::to_string(n);
    nodes.push_back(node);
    for (int l = 0; l < per_node[n]; ++l) {
      RankPlacement p;
      p.rank = rank++;
      p.node_id = node.id;
      ranks.push_back(p);
    }
  }
  return JobTopology::assemble(nodes, ranks);
}

}  // namespace

// Megatron-LM's initialize_model_parallel docstring: 16 GPUs, tp=2, pp=4 (dp=2).
TEST(Mesh, MegatronDocumentedExample) {
  MeshShape s = MeshShape{.tp = 2, .pp = 4}.resolved(16);
  EXPECT_EQ(s.dp, 2);
  EXPECT_EQ(all_groups(s, 16, {Dim::tp}),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(all_groups(s, 16, {Dim::dp}),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(all_groups(s, 16, {Dim::pp}),
            (Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
}

TEST(Mesh, EveryDimensionIsAStrideInMegatronOrder) {
  const std::vector<MeshShape> shapes = {{.tp = 2, .dp = 2, .pp = 2},
                                         {.tp = 4, .dp = 2, .pp = 1},
                                         {.tp = 1, .dp = 2, .pp = 4},
                                         {.tp = 2, .cp = 2, .ep = 2, .dp = 1},
                                         {.tp = 1, .cp = 2, .dp = 2, .pp = 2},
                                         {.tp = 2, .ep = 2, .dp = 2, .pp = 1},
                                         {.tp = 3, .cp = 1, .ep = 1, .dp = 2, .pp = 1}};
  for (const MeshShape& s : shapes) {
    const int world = s.tp * s.cp * s.ep * s.dp * s.pp;
    for (int r = 0; r < world; ++r) {
      for (Dim d : {Dim::tp, Dim::cp, Dim::ep, Dim::dp, Dim::pp}) {
        const std::vector<int> want = strided(s, r, d);
        EXPECT_EQ(s.group(r, {d}), want) << s.to_string() << " rank " << r;
        // The coordinate is the rank's position in its group.
        EXPECT_EQ(s.coords(r)[size_t(d)],
                  int(std::find(want.begin(), want.end(), r) - want.begin()));
      }
    }
  }
}

TEST(Mesh, CombinedGroupsAreTheProductOfTheirDimensions) {
  const MeshShape s{.tp = 2, .cp = 2, .ep = 1, .dp = 2, .pp = 1};
  // dp x cp: same tp coordinate; 4 ranks.
  EXPECT_EQ(s.group(0, {Dim::dp, Dim::cp}), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(s.group(5, {Dim::cp, Dim::dp}), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(s.group(6, {Dim::tp, Dim::cp}), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(all_groups(s, 8, {Dim::tp, Dim::cp, Dim::dp}).size(), 1u);
}

TEST(Mesh, ShapesThatDoNotFitTheWorldAreRejected) {
  expect_invalid([] { MeshShape{.tp = 3}.resolved(8); },
                 {"tp=3", "tp*cp*ep*pp = 3", "does not divide the world size 8"});
  expect_invalid([] { MeshShape{.tp = 2, .dp = 3}.resolved(8); },
                 {"tp*cp*ep*dp*pp = 6", "the world has 8 ranks"});
  expect_invalid([] { MeshShape{.tp = 0}.resolved(8); }, {"tp=0 must be at least 1"});
  expect_invalid([] { MeshShape{.dp = -1}.resolved(8); }, {"dp=-1"});
  EXPECT_EQ((MeshShape{.tp = 2, .cp = 2}.resolved(8).dp), 2);
}

// An unresolved shape (dp = 0: "fill") or a rank outside it is refused where it used to divide by
// zero (SIGFPE) or read past the job's ranks.
TEST(Mesh, AnUnresolvedShapeOrARankOutsideItIsRefused) {
  expect_invalid([] { MeshShape{.tp = 2}.coords(3); }, {"dp=0 is not resolved", "resolved(world)"});
  expect_invalid([] { MeshShape{.tp = 2}.group(0, {Dim::tp}); }, {"dp=0 is not resolved"});
  expect_invalid([] { MeshShape{.tp = 0, .dp = 2}.coords(0); }, {"tp=0 is not resolved"});
  expect_invalid([] { MeshShape{.tp = 2}.resolved(4).coords(4); },
                 {"rank 4 is out of range [0, 4)"});
  expect_invalid([] { MeshShape{.tp = 2}.resolved(4).coords(-1); }, {"rank -1 is out of range"});
  const JobTopology two_by_four = cpu_job({4, 4});
  expect_invalid([&] { validate_mesh(MeshShape{.tp = 4}, two_by_four); }, {"dp=0 is not resolved"});
  expect_invalid([&] { validate_mesh(MeshShape{.tp = 2}.resolved(4), two_by_four); },
                 {"multiply to 4 but the job has 8 ranks"});
  EXPECT_EQ((MeshShape{.tp = 2}.resolved(4).coords(3)),
            (std::array<int, kMeshDims>{1, 0, 0, 1, 0}));
}

TEST(Mesh, TpMustStayInsideANode) {
  const JobTopology two_by_four = cpu_job({4, 4});
  validate_mesh(MeshShape{.tp = 4}.resolved(8), two_by_four);
  validate_mesh(MeshShape{.tp = 2, .pp = 2}.resolved(8), two_by_four);
  expect_invalid([&] { validate_mesh(MeshShape{.tp = 8}.resolved(8), two_by_four); },
                 {"tp=8 is larger than a node", "2 nodes has 4 ranks"});
  const JobTopology three_three = cpu_job({3, 3});
  expect_invalid(
      [&] { validate_mesh(MeshShape{.tp = 2}.resolved(6), three_three); },
      {"TP group of world ranks 2,3", "node0 (ranks 2)", "node1 (ranks 3)", "allow_cross_node_tp"});
  validate_mesh(MeshShape{.tp = 2}.resolved(6), three_three, {.allow_cross_node_tp = true});
  validate_mesh(MeshShape{.tp = 3}.resolved(6), three_three);
  const JobTopology uneven = cpu_job({4, 2});
  validate_mesh(MeshShape{.tp = 2}.resolved(6), uneven);
}

TEST(Mesh, ProposalKeepsTpInTheSmallestNode) {
  EXPECT_EQ(propose_mesh(cpu_job({4, 4})).to_string(), "tp=4 cp=1 ep=1 dp=2 pp=1");
  EXPECT_EQ(propose_mesh(cpu_job({4, 4}), 2).to_string(), "tp=4 cp=1 ep=1 dp=1 pp=2");
  EXPECT_EQ(propose_mesh(cpu_job({4, 2})).to_string(), "tp=2 cp=1 ep=1 dp=3 pp=1");
  EXPECT_EQ(propose_mesh(cpu_job({3, 3, 3, 3}), 2).to_string(), "tp=3 cp=1 ep=1 dp=2 pp=2");
  expect_invalid([] { propose_mesh(cpu_job({2, 2}), 3); }, {"pp=3", "world size 4"});
}

// On the POWER8 file GPUs 0-1 and 2-3 are NVLink pairs: TP is the pair, not the whole node.
TEST(Mesh, ProposalFollowsTheNvlinkIsland) {
  NodeTopology node =
      load_node(std::string(STRATA_TOPO_DATA) + "/hwloc/ibm-power8-4xP100-nvlink.xml");
  node.id = "p8";
  std::vector<RankPlacement> ranks;
  for (int r = 0; r < 4; ++r) {
    RankPlacement p;
    p.rank = r;
    p.node_id = "p8";
    p.gpu = r;
    ranks.push_back(p);
  }
  const JobTopology job = JobTopology::assemble({node}, ranks);
  EXPECT_EQ(propose_mesh(job).to_string(), "tp=2 cp=1 ep=1 dp=2 pp=1");
}
