// Groups of one rank (every rank its own split): no network transport is made for them
// (transport/solo/), yet every operation works as in any group: messages to itself in either
// order, matched by tag in the order they were sent, a size mismatch named, collectives exact.
// (mp_np1 runs the whole collective suite on a world of one as well.)
#include <fstream>

#include "mp.hpp"

using namespace strata;

namespace {

// UCX's shared-memory segments this process has mapped (a worker maps its own at creation).
int ucx_segments_mapped() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) n += line.find("ucx_shm_posix") != line.npos;
  return n;
}

}  // namespace

TEST(GroupOfOne, MakesNoUcxWorker) {
  auto& w = mp::world();
  const int before = ucx_segments_mapped();
  std::vector<Communicator> groups;
  for (int i = 0; i < 8; ++i) groups.push_back(w.split(w.rank(), 0));
  EXPECT_EQ(ucx_segments_mapped(), before) << "8 groups of one mapped UCX segments";
  for (auto& g : groups) {
    ASSERT_EQ(g.size(), 1);
    ASSERT_EQ(g.rank(), 0);
    std::vector<float> v = {1.5f, -2.0f};
    g.all_reduce(buffer(v), ReduceOp::sum).wait();
    EXPECT_EQ(v, (std::vector<float>{1.5f, -2.0f}));
  }
  w.barrier().wait();
}

TEST(GroupOfOne, MessagesToItselfInEitherOrderAndTagOrder) {
  auto& w = mp::world();
  Communicator g = w.split(w.rank(), 0);
  std::vector<int32_t> a = {1, 2, 3}, b = {4, 5, 6}, c = {7, 8, 9};
  std::vector<int32_t> ra(3, -1), rb(3, -1), rc(3, -1), rd(3, -1);
  // The receive first: it waits for the send that follows.
  Work r1 = g.recv(buffer(ra), 0, 5);
  g.send(buffer(a), 0, 5).wait();
  r1.wait();
  EXPECT_EQ(ra, a);
  // Sends first, two of one tag and one of another: the tag picks, the order within it holds.
  g.send(buffer(b), 0, 7).wait();
  g.send(buffer(c), 0, 7).wait();
  g.send(buffer(a), 0, 8).wait();
  g.recv(buffer(rc), 0, 8).wait();
  g.recv(buffer(rb), 0, 7).wait();
  g.recv(buffer(rd), -1, 7).wait();  // any source: this rank
  EXPECT_EQ(rc, a);
  EXPECT_EQ(rb, b);
  EXPECT_EQ(rd, c);
  // A batch of both, as a pipeline's first and last stage in one rank would post it.
  std::vector<int32_t> big(1 << 20), got(1 << 20, -1);
  for (size_t i = 0; i < big.size(); ++i) big[i] = int32_t(i * 2654435761u);
  for (Work& x :
       g.send_recv({{PeerOp::recv, buffer(got), 0, 9}, {PeerOp::send, buffer(big), 0, 9}}))
    x.wait();
  EXPECT_EQ(mp::compare(got.data(), big.data(), DataType::i32, big.size()), "");
  w.barrier().wait();
}

TEST(GroupOfOne, AMessageOfAnotherSizeIsNamed) {
  auto& w = mp::world();
  Communicator g = w.split(w.rank(), 0);
  std::vector<int32_t> eight(8, 1), four(4, -1);
  g.send(buffer(eight), 0, 3).wait();
  mp::expect_error([&] { g.recv(buffer(four), 0, 3).wait(); }, ErrorCode::invalid_argument,
                   {"recv", "peer 0", "size mismatch", "16 bytes", "sent 32"});
  EXPECT_EQ(four, std::vector<int32_t>(4, -1)) << "a refused message still wrote the buffer";
  // The group goes on.
  std::vector<double> v = {3.25};
  g.all_reduce(buffer(v), ReduceOp::max).wait();
  EXPECT_EQ(v[0], 3.25);
  w.barrier().wait();
}
