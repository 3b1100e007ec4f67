// The job view gathered over the world communicator. Under a plain launch every rank shares this
// machine; with STRATA_TEST_RANKS_PER_NODE=k and STRATA_NODE_ID=emu<rank/k> set per rank (the
// mp_topo_two_nodes test does this), the view must show the emulated nodes.
#include <cstdlib>
#include <set>

#include "mp.hpp"

using namespace strata;

namespace {

// Ranks per node this run was launched with, or 0 when every rank runs on this one machine.
int ranks_per_emulated_node() {
  const char* v = std::getenv("STRATA_TEST_RANKS_PER_NODE");
  return v ? std::atoi(v) : 0;
}

}  // namespace

TEST(Topology, JobViewHasEveryRankOnItsNode) {
  auto& w = mp::world();
  const JobTopology job = JobTopology::gather(w);
  const int n = w.size();
  ASSERT_EQ(job.ranks.size(), size_t(n));
  ASSERT_EQ(job.node_of_rank.size(), size_t(n));
  const int k = ranks_per_emulated_node();
  const int nodes = k > 0 ? (n + k - 1) / k : 1;
  ASSERT_EQ(job.nodes.size(), size_t(nodes));
  for (int r = 0; r < n; ++r) {
    const RankPlacement& p = job.ranks[size_t(r)];
    EXPECT_EQ(p.rank, r);
    const int node = k > 0 ? r / k : 0;
    EXPECT_EQ(job.node_of_rank[size_t(r)], node) << "rank " << r;
    EXPECT_EQ(p.local_rank, k > 0 ? r % k : r) << "rank " << r;
    if (k > 0) {
      EXPECT_EQ(p.node_id, "emu" + std::to_string(node));
    }
    // A GPU of its node, or none where the node has none (not "this machine has no GPU": the
    // device sessions run this suite on one).
    const int gpus =
        int(job.nodes[size_t(job.node_of_rank[size_t(r)])].of_kind(DeviceKind::gpu).size());
    if (gpus == 0)
      EXPECT_EQ(p.gpu, -1) << "rank " << r << " on a node without GPUs";
    else
      EXPECT_TRUE(p.gpu >= -1 && p.gpu < gpus) << "rank " << r << " gpu " << p.gpu;
    EXPECT_FALSE(p.cpus.empty());
  }
  for (size_t i = 0; i < job.nodes.size(); ++i) {
    const NodeTopology& nd = job.nodes[i];
    EXPECT_GE(nd.of_kind(DeviceKind::cpu).size(), 1u);
    EXPECT_GE(nd.pus, 1);
    std::vector<int> want;
    for (int r = 0; r < n; ++r)
      if (job.node_of_rank[size_t(r)] == int(i)) want.push_back(r);
    EXPECT_EQ(job.ranks_on(i), want);
  }
  // Link classes: same node is a host path (no GPUs), different nodes go over the network.
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      const PathClass c = job.link(a, b).cls;
      if (job.node_of_rank[size_t(a)] != job.node_of_rank[size_t(b)])
        EXPECT_EQ(c, PathClass::net) << a << "-" << b;
      else
        EXPECT_LT(c, PathClass::net) << a << "-" << b;
    }
  // Every rank built the same view.
  const std::string xml = job.to_xml();
  EXPECT_TRUE(mp::identical_on_all_ranks(w, xml.data(), xml.size()));
}

TEST(Topology, SplitGroupsGatherTheirOwnView) {
  auto& w = mp::world();
  Communicator half = w.split(w.rank() % 2, w.rank());
  const JobTopology job = JobTopology::gather(half);
  ASSERT_EQ(job.ranks.size(), size_t(half.size()));
  EXPECT_EQ(job.ranks[size_t(half.rank())].rank, half.rank());
  std::set<std::string> ids;
  for (const auto& p : job.ranks) ids.insert(p.node_id);
  EXPECT_EQ(job.nodes.size(), ids.size());
}
