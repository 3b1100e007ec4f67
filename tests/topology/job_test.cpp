// A rank's placement (GPU, NUMA node, NIC) and the job's view of every node, built from a faked
// all-gather across threads.
#include <gtest/gtest.h>

#include <barrier>
#include <thread>

#include "topology/placement.hpp"
#include "topology_fixtures.hpp"

using namespace topo_test;

TEST(Placement, GpuFromLocalRankAndVisibleDevicesNicFromTheGpu) {
  const NodeTopology& n = lassen();
  topo::PlacementEnv env{"n1", "host", 1, std::nullopt, "0-1000"};
  RankPlacement r = topo::place(n, 5, env);
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.gpu, 1);
  EXPECT_EQ(r.nic, "mlx5_1");
  EXPECT_EQ(r.numa, -1);  // unbound: spans both sockets
  env.visible_gpus = "3,2";
  env.local_rank = 0;
  EXPECT_EQ(topo::place(n, 0, env).gpu, 3);
  EXPECT_EQ(topo::place(n, 0, env).nic, "mlx5_3");
  env.visible_gpus = "";
  EXPECT_EQ(topo::place(n, 0, env).gpu, -1);
  env.visible_gpus = "2,MIG-x,1";  // like CUDA: the list ends at the first unknown entry
  env.local_rank = 1;
  EXPECT_EQ(topo::place(n, 0, env).gpu, 2);
  const NodeTopology& p8 = power8();
  env.visible_gpus = "GPU-ea919830";  // a UUID prefix
  EXPECT_EQ(topo::place(p8, 0, env).gpu, 2);
}

TEST(Placement, CpuOnlyRanksGetTheNumaNodeAndANicNearTheirCores) {
  const NodeTopology& n = quartz();
  topo::PlacementEnv env{"n1", "host", 0, std::nullopt, "20-23"};
  RankPlacement r = topo::place(n, 0, env);
  EXPECT_EQ(r.gpu, -1);
  EXPECT_EQ(r.numa, 1);
  EXPECT_EQ(r.cpus, "20-23");
  EXPECT_EQ(r.nic, "hfi1_0");
  // Ethernet only: the NIC on the rank's own socket; equals are spread by local rank.
  NodeTopology eth = n;
  eth.devices.erase(eth.devices.begin() + eth.find("hfi1_0"));
  env.cpus = "2";
  EXPECT_EQ(topo::place(eth, 0, env).nic, "eno1");
  env.local_rank = 1;
  EXPECT_EQ(topo::place(eth, 0, env).nic, "aci0");
}

namespace {

// An all-gather across threads, standing in for the bootstrap's: each round every thread drops
// its blob and reads everyone's.
class FakeAllGather {
 public:
  explicit FakeAllGather(int n) : blobs_(size_t(n)), sync_(n) {}
  AllGatherBytes for_rank(int r) {
    return [this, r](const std::vector<uint8_t>& mine) {
      blobs_[size_t(r)] = mine;
      sync_.arrive_and_wait();
      auto all = blobs_;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (r == 0) rounds_.push_back(all);
      }
      sync_.arrive_and_wait();
      return all;
    };
  }
  std::vector<std::vector<std::vector<uint8_t>>> rounds_;

 private:
  std::vector<std::vector<uint8_t>> blobs_;
  std::barrier<> sync_;
  std::mutex mu_;
};

}  // namespace

// Two emulated nodes (STRATA_NODE_ID A and B), two ranks each: a DGX-2 and a Lassen node.
TEST(Job, GatherBuildsTheTwoNodeView) {
  const NodeTopology* hw[4] = {&dgx2(), &dgx2(), &lassen(), &lassen()};
  const char* ids[4] = {"A", "A", "B", "B"};
  FakeAllGather fake(4);
  std::vector<JobTopology> views(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      topo::PlacementEnv env{ids[r], std::string("host") + ids[r], r % 2, std::nullopt, "0-1000"};
      RankPlacement me = topo::place(*hw[r], r, env);
      views[size_t(r)] = JobTopology::gather(*hw[r], me, fake.for_rank(r));
    });
  }
  for (auto& t : threads) t.join();
  // Round 2 carried one node description per node, from its lowest rank.
  ASSERT_EQ(fake.rounds_.size(), 2u);
  EXPECT_FALSE(fake.rounds_[1][0].empty());
  EXPECT_TRUE(fake.rounds_[1][1].empty());
  EXPECT_FALSE(fake.rounds_[1][2].empty());
  EXPECT_TRUE(fake.rounds_[1][3].empty());
  for (const JobTopology& job : views) {
    ASSERT_EQ(job.nodes.size(), 2u);
    EXPECT_EQ(job.nodes[0].id, "A");
    EXPECT_EQ(job.nodes[1].id, "B");
    EXPECT_EQ(job.ranks_on(0), (std::vector<int>{0, 1}));
    EXPECT_EQ(job.ranks_on(1), (std::vector<int>{2, 3}));
    EXPECT_EQ(job.ranks[3].local_rank, 1);
    EXPECT_EQ(job.ranks[2].gpu, 0);
    EXPECT_EQ(job.ranks[3].nic, "mlx5_1");
    EXPECT_EQ(job.link(0, 1).cls, PathClass::nvb);
    EXPECT_EQ(job.link(2, 3).cls, PathClass::pix);
    EXPECT_EQ(job.link(1, 1).cls, PathClass::loc);
    Link across = job.link(0, 2);
    EXPECT_EQ(across.cls, PathClass::net);
    EXPECT_DOUBLE_EQ(across.bandwidth_gbs, 10 / 8.0);  // the DGX-2 export has no NIC
    EXPECT_EQ(job.nodes[0].of_kind(DeviceKind::gpu).size(), 16u);
    EXPECT_EQ(job.nodes[1].link(0, 1).cls, lassen().link(0, 1).cls);
  }
}

TEST(Job, DumpRoundTripsAndRanksMustMatchTheirNodes) {
  NodeTopology a = quartz(), b = g4dn();
  a.id = "A";
  b.id = "B";
  std::vector<RankPlacement> ranks(3);
  ranks[0] = {0, "A", "qa", 0, "0-3", 0, -1, "hfi1_0"};
  ranks[1] = {1, "B", "gb", 0, "24-25", 1, 4, "rdmap197s0"};
  ranks[2] = {2, "A", "qa", 0, "20-21", 1, -1, "hfi1_0"};
  JobTopology job = JobTopology::assemble({a, b}, ranks);
  EXPECT_EQ(job.ranks[2].local_rank, 1);
  EXPECT_EQ(job.link(0, 2).cls, PathClass::sys);  // CPU ranks on the two sockets
  EXPECT_EQ(job.link(0, 1).cls, PathClass::net);
  EXPECT_DOUBLE_EQ(job.link(0, 1).bandwidth_gbs, 12.5);  // both RDMA, rate unknown: 100 Gb/s
  std::string path = temp_file("job.xml", "");
  job.save(path);
  JobTopology back = JobTopology::load(path);
  ASSERT_EQ(back.ranks.size(), 3u);
  EXPECT_EQ(back.ranks[1].gpu, 4);
  EXPECT_EQ(back.node_of_rank, job.node_of_rank);
  EXPECT_EQ(back.link(0, 1).cls, PathClass::net);
  fs::remove(path);
  ranks[1].node_id = "C";
  expect_invalid([&] { JobTopology::assemble({a, b}, ranks); }, {"rank 1", "unknown node 'C'"});
  ranks[1].node_id = "B";
  ranks[1].gpu = 9;
  expect_invalid([&] { JobTopology::assemble({a, b}, ranks); }, {"rank 1", "GPU 9"});
}
