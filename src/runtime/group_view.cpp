#include "runtime/group_view.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <sstream>

#include "base/config.hpp"
#include "topology/estimates.hpp"

namespace strata::runtime {
namespace {

// The slower of two estimates: the lower bandwidth, the higher latency.
Link slowest(const Link& a, const Link& b) {
  return {a.cls, std::min(a.bandwidth_gbs, b.bandwidth_gbs), std::max(a.latency_us, b.latency_us)};
}

}  // namespace

std::string my_links(int rank) {
  static std::once_flag once;
  static std::string line;
  std::call_once(once, [rank] {
    // Ranks of one node share its memory through one CPU (the segment's and UCX's copies).
    const Link host{PathClass::phb, topo::kHostCopyGbs, topo::kHostLatencyUs};
    const NodeTopology node = detect_node();
    const Link net = topo::nic_link(node, place_rank(node, rank).nic);
    std::ostringstream out;
    out << host.bandwidth_gbs << ' ' << host.latency_us << ' ' << net.bandwidth_gbs << ' '
        << net.latency_us;
    line = out.str();
  });
  return line;
}

algo::GroupView group_view(const algo::NodeLayout& layout, const std::vector<std::string>& links,
                           bool shm, const ErrorContext& where) {
  algo::GroupView v;
  v.n = int(layout.node_of_rank.size());
  v.nodes = int(layout.nodes());
  v.smallest = int(layout.smallest());
  v.largest = int(layout.largest());
  v.shm = shm;
  v.node_segments = config().shm;
  for (size_t r = 0; r < links.size(); ++r) {
    std::istringstream in(links[r]);
    Link intra{PathClass::phb}, inter{PathClass::net};
    in >> intra.bandwidth_gbs >> intra.latency_us >> inter.bandwidth_gbs >> inter.latency_us;
    if (!in || !std::isfinite(intra.bandwidth_gbs + intra.latency_us + inter.bandwidth_gbs +
                              inter.latency_us)) {
      throw Error(
          ErrorCode::internal, where,
          "rank " + std::to_string(r) + " reported links '" + links[r] + "', not four numbers");
    }
    v.intra = r == 0 ? intra : slowest(v.intra, intra);
    v.inter = r == 0 ? inter : slowest(v.inter, inter);
  }
  return v;
}

std::string describe_links(const algo::GroupView& v) {
  std::ostringstream out;
  auto link = [&](const char* name, const Link& l) {
    out << name << ' ' << path_class_name(l.cls) << ' ' << l.bandwidth_gbs << " GB/s "
        << l.latency_us << " us";
  };
  link("intra", v.intra);
  out << ", ";
  link("inter", v.inter);
  return out.str();
}

}  // namespace strata::runtime
