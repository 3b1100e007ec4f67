#include "algorithms/two_level.hpp"

#include <algorithm>
#include <cstdint>

namespace strata::algo {

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

namespace {
int index_on_node(const NodeLayout& l, int rank) {
  const auto& mine = l.ranks_of[size_t(l.node_of_rank[size_t(rank)])];
  return int(std::find(mine.begin(), mine.end(), rank) - mine.begin());
}
}  // namespace

TwoLevel::TwoLevel(const NodeLayout& l, int rank)
    : layout(l),
      node(l.node_of_rank[size_t(rank)]),
      local_rank(index_on_node(l, rank)),
      local_size(int(l.ranks_of[size_t(node)].size())) {}

uint8_t* TwoLevel::scratch(size_t bytes) {
  if (scratch_.size() < std::max<size_t>(bytes, 1)) scratch_.resize(std::max<size_t>(bytes, 1));
  return scratch_.data();
}

}  // namespace strata::algo
