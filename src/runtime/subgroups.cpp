#include "runtime/subgroups.hpp"

#include "runtime/calls.hpp"
#include "runtime/communicator_impl.hpp"

namespace strata::runtime {

int group_rank_of(const algo::NodeLayout& layout, const std::string& group,
                  const ErrorContext& sub) {
  const std::string local = group + "/local", rail = group + "/rail";
  auto index_after = [&](const std::string& prefix) -> int {
    if (sub.group.compare(0, prefix.size(), prefix) != 0) return -1;
    const std::string rest = sub.group.substr(prefix.size());
    if (rest.empty() || rest.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stoi(rest);
  };
  if (sub.peer < 0) return -1;
  if (const int n = index_after(local); n >= 0 && size_t(n) < layout.nodes()) {
    const auto& on_node = layout.ranks_of[size_t(n)];
    return size_t(sub.peer) < on_node.size() ? on_node[size_t(sub.peer)] : -1;
  }
  if (const int j = index_after(rail); j >= 0) {
    int k = 0;  // rail rank k is the k-th node that has a rank with local index j
    for (const auto& on_node : layout.ranks_of) {
      if (on_node.size() <= size_t(j)) continue;
      if (k++ == sub.peer) return on_node[size_t(j)];
    }
  }
  return -1;
}

SubGroups::SubGroups(const algo::TwoLevel& me, const std::shared_ptr<Store>& store,
                     const std::string& name, std::chrono::milliseconds timeout) {
  const algo::NodeLayout& layout = me.layout;
  // Rail members: the nodes that have a rank with my local index, in node order.
  int rail_rank = 0, rail_size = 0;
  for (size_t n = 0; n < layout.nodes(); ++n) {
    if (layout.ranks_of[n].size() <= size_t(me.local_rank)) continue;
    if (int(n) == me.node) rail_rank = rail_size;
    ++rail_size;
  }
  CommOptions opts;
  opts.timeout = timeout;
  opts.name = name + "/local" + std::to_string(me.node);
  local = create_group(std::make_shared<PrefixStore>(store, "hier/local" + std::to_string(me.node)),
                       me.local_rank, me.local_size, opts, /*any_thread=*/true);
  opts.name = name + "/rail" + std::to_string(me.local_rank);
  try {
    rail = create_group(
        std::make_shared<PrefixStore>(store, "hier/rail" + std::to_string(me.local_rank)),
        rail_rank, rail_size, opts, /*any_thread=*/true);
  } catch (const Error&) {
    local->abort();  // my node's ranks may already wait on me in it
    throw;
  }
}

}  // namespace strata::runtime
