#include "runtime/subgroups.hpp"

#include <algorithm>

#include "runtime/calls.hpp"
#include "runtime/communicator_impl.hpp"

namespace strata::runtime {

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

int NodeLayout::group_rank_of(const std::string& group, const ErrorContext& sub) const {
  const std::string local = group + "/local", rail = group + "/rail";
  auto index_after = [&](const std::string& prefix) -> int {
    if (sub.group.compare(0, prefix.size(), prefix) != 0) return -1;
    const std::string rest = sub.group.substr(prefix.size());
    if (rest.empty() || rest.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stoi(rest);
  };
  if (sub.peer < 0) return -1;
  if (const int n = index_after(local); n >= 0 && size_t(n) < nodes()) {
    const auto& on_node = ranks_of[size_t(n)];
    return size_t(sub.peer) < on_node.size() ? on_node[size_t(sub.peer)] : -1;
  }
  if (const int j = index_after(rail); j >= 0) {
    int k = 0;  // rail rank k is the k-th node that has a rank with local index j
    for (const auto& on_node : ranks_of) {
      if (on_node.size() <= size_t(j)) continue;
      if (k++ == sub.peer) return on_node[size_t(j)];
    }
  }
  return -1;
}

SubGroups::SubGroups(const NodeLayout& l, int rank, const std::shared_ptr<Store>& store,
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
  local = create_group(std::make_shared<PrefixStore>(store, "hier/local" + std::to_string(node)),
                       local_rank, int(mine.size()), opts);
  opts.name = name + "/rail" + std::to_string(local_rank);
  try {
    rail =
        create_group(std::make_shared<PrefixStore>(store, "hier/rail" + std::to_string(local_rank)),
                     rail_rank, rail_size, opts);
  } catch (const Error&) {
    local->abort();  // my node's ranks may already wait on me in it
    throw;
  }
}

uint8_t* SubGroups::scratch_of(size_t bytes) {
  if (scratch.size() < bytes) scratch.resize(bytes);
  return scratch.data();
}

}  // namespace strata::runtime
