#include "comm/hierarchy.hpp"

#include <algorithm>

namespace strata::comm {

NodeLayout::NodeLayout(std::vector<int> of) : node_of_rank(std::move(of)) {
  for (size_t r = 0; r < node_of_rank.size(); ++r) {
    const size_t n = size_t(node_of_rank[r]);
    if (ranks_of.size() <= n) ranks_of.resize(n + 1);
    ranks_of[n].push_back(int(r));
  }
}

size_t NodeLayout::smallest() const {
  size_t s = SIZE_MAX;
  for (const auto& v : ranks_of) s = std::min(s, v.size());
  return ranks_of.empty() ? 0 : s;
}

size_t NodeLayout::largest() const {
  size_t s = 0;
  for (const auto& v : ranks_of) s = std::max(s, v.size());
  return s;
}

Hierarchy::Hierarchy(const NodeLayout& l, int rank, const std::shared_ptr<Store>& store,
                     const std::string& name, std::chrono::milliseconds timeout)
    : layout(l), node(l.node_of_rank[size_t(rank)]) {
  const std::vector<int>& mine = layout.ranks_of[size_t(node)];
  local_rank = int(std::find(mine.begin(), mine.end(), rank) - mine.begin());
  // Rail members: the nodes that have a rank with my local index, in node order.
  int rail_rank = 0, rail_size = 0;
  for (size_t n = 0; n < layout.nodes(); ++n) {
    if (layout.ranks_of[n].size() <= size_t(local_rank)) continue;
    if (int(n) == node) rail_rank = rail_size;
    ++rail_size;
  }
  CommOptions opts;
  opts.timeout = timeout;
  opts.name = name + "/local" + std::to_string(node);
  local = Communicator::create(
      std::make_shared<PrefixStore>(store, "hier/local" + std::to_string(node)), local_rank,
      int(mine.size()), opts);
  opts.name = name + "/rail" + std::to_string(local_rank);
  rail = Communicator::create(
      std::make_shared<PrefixStore>(store, "hier/rail" + std::to_string(local_rank)),
      rail_rank, rail_size, opts);
}

uint8_t* Hierarchy::scratch_of(size_t bytes) {
  if (scratch.size() < bytes) scratch.resize(bytes);
  return scratch.data();
}

}  // namespace strata::comm
