// JobTopology::gather over a Communicator: the byte-blob all-gather the view is built with, done as
// two fixed-size all-gathers (lengths, then blobs padded to the longest).
#include <algorithm>

#include "strata/communicator.hpp"
#include "strata/topology.hpp"

namespace strata {
namespace {

std::vector<std::vector<uint8_t>> all_gather_bytes(Communicator& comm,
                                                   const std::vector<uint8_t>& mine) {
  const size_t n = size_t(comm.size());
  std::vector<int64_t> my_len = {int64_t(mine.size())}, lens(n);
  comm.all_gather(buffer(my_len), buffer(lens)).wait();
  const size_t longest = size_t(std::max<int64_t>(1, *std::max_element(lens.begin(), lens.end())));
  std::vector<uint8_t> padded(longest), all(longest * n);
  std::copy(mine.begin(), mine.end(), padded.begin());
  comm.all_gather(buffer(padded), buffer(all)).wait();
  std::vector<std::vector<uint8_t>> out(n);
  for (size_t r = 0; r < n; ++r)
    out[r].assign(all.begin() + ptrdiff_t(r * longest),
                  all.begin() + ptrdiff_t(r * longest + size_t(lens[r])));
  return out;
}

}  // namespace

JobTopology JobTopology::gather(Communicator& comm) {
  const NodeTopology node = detect_node();
  const RankPlacement me = place_rank(node, comm.rank());
  return gather(node, me,
                [&](const std::vector<uint8_t>& mine) { return all_gather_bytes(comm, mine); });
}

}  // namespace strata
