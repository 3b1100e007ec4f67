// The job view: every rank's placement and node, gathered with two all-gathers, and the link
// between any two ranks.
#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "base/log.hpp"
#include "strata/topology.hpp"
#include "topology/dump.hpp"
#include "topology/errors.hpp"
#include "topology/estimates.hpp"
#include "topology/xml.hpp"

namespace strata {
namespace {

std::vector<uint8_t> to_bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string to_text(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

// FNV-1a: ranks of one node compare their node descriptions without sending them.
std::string fingerprint(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

// The device a rank's traffic on its node starts from: its GPU, else its NUMA node's CPU.
int endpoint(const NodeTopology& node, const RankPlacement& r) {
  if (int g = node.gpu(r.gpu); g >= 0) return g;
  return node.cpu(r.numa);
}

}  // namespace

JobTopology JobTopology::gather(const NodeTopology& mine, const RankPlacement& me,
                                const AllGatherBytes& allgather) {
  NodeTopology described = mine;
  described.id = me.node_id;
  const std::string node_text = topo::node_xml(described);
  const std::string print = fingerprint(node_text);
  // Round 1: placements, each with its node's fingerprint.
  std::string extra = " fingerprint=\"" + print + "\"";
  std::vector<std::vector<uint8_t>> blobs = allgather(to_bytes(topo::rank_xml(me, 0, extra)));
  if (me.rank < 0 || size_t(me.rank) >= blobs.size())
    topo::fail("rank " + std::to_string(me.rank) + " is not among the " +
               std::to_string(blobs.size()) + " ranks the all-gather returned");
  std::vector<RankPlacement> ranks;
  std::vector<std::string> prints;
  std::map<std::string, int> owner;  // node id -> its lowest rank, which describes it
  for (size_t r = 0; r < blobs.size(); ++r) {
    const std::string source = "placement from rank " + std::to_string(r);
    topo::XmlElement e = topo::parse_xml(to_text(blobs[r]), source);
    ranks.push_back(topo::read_rank(e, source));
    prints.push_back(e.get("fingerprint"));
    if (ranks.back().rank != int(r))
      topo::fail(source + " says it is rank " + std::to_string(ranks.back().rank));
    owner.emplace(ranks.back().node_id, int(r));
  }
  // Round 2: one node description per node.
  const bool owns = owner.at(me.node_id) == me.rank;
  blobs = allgather(owns ? to_bytes(node_text) : std::vector<uint8_t>{});
  if (blobs.size() != ranks.size())
    topo::fail("the second all-gather returned " + std::to_string(blobs.size()) + " blobs for " +
               std::to_string(ranks.size()) + " ranks");
  std::vector<NodeTopology> nodes;
  std::vector<int> owners;
  for (const auto& [id, r] : owner) owners.push_back(r);
  std::sort(owners.begin(), owners.end());
  for (int r : owners) {
    const std::string source = "node description from rank " + std::to_string(r);
    if (blobs[size_t(r)].empty()) topo::fail(source + " is empty");
    nodes.push_back(topo::read_node(topo::parse_xml(to_text(blobs[size_t(r)]), source), source));
    nodes.back().id = ranks[size_t(r)].node_id;
  }
  for (size_t r = 0; r < ranks.size(); ++r) {
    int o = owner.at(ranks[r].node_id);
    if (prints[r] != prints[size_t(o)]) {
      STRATA_LOG(WARN, "TOPO") << "rank " << r << " sees other hardware on node "
                               << ranks[r].node_id << " than rank " << o << "; using rank " << o
                               << "'s view";
    }
  }
  return assemble(std::move(nodes), std::move(ranks));
}

namespace {

// assemble(), with `where` (a file name and ": ", or nothing) in front of every error.
JobTopology build(std::vector<NodeTopology> nodes, std::vector<RankPlacement> ranks,
                  const std::string& where) {
  JobTopology job;
  job.nodes = std::move(nodes);
  job.ranks = std::move(ranks);
  std::map<std::string, int> index;
  for (size_t i = 0; i < job.nodes.size(); ++i)
    if (!index.emplace(job.nodes[i].id, int(i)).second)
      topo::fail(where + "two nodes with id '" + job.nodes[i].id + "'");
  std::vector<int> next_local(job.nodes.size(), 0);
  for (size_t r = 0; r < job.ranks.size(); ++r) {
    RankPlacement& p = job.ranks[r];
    if (p.rank != int(r))
      topo::fail(where + "rank entry " + std::to_string(r) + " is for rank " +
                 std::to_string(p.rank));
    auto it = index.find(p.node_id);
    if (it == index.end())
      topo::fail(where + "rank " + std::to_string(r) + " is on unknown node '" + p.node_id + "'");
    const NodeTopology& node = job.nodes[size_t(it->second)];
    if (p.gpu >= 0 && node.gpu(p.gpu) < 0)
      topo::fail(where + "rank " + std::to_string(r) + " has GPU " + std::to_string(p.gpu) +
                 ", which node '" + node.id + "' does not have");
    if (!p.nic.empty() && node.find(p.nic) < 0)
      topo::fail(where + "rank " + std::to_string(r) + " has NIC " + p.nic + ", which node '" +
                 node.id + "' does not have");
    job.node_of_rank.push_back(it->second);
    p.local_rank = next_local[size_t(it->second)]++;
  }
  return job;
}

}  // namespace

JobTopology JobTopology::assemble(std::vector<NodeTopology> nodes,
                                  std::vector<RankPlacement> ranks) {
  return build(std::move(nodes), std::move(ranks), "");
}

Link JobTopology::link(int a, int b) const {
  const RankPlacement& ra = ranks.at(size_t(a));
  const RankPlacement& rb = ranks.at(size_t(b));
  const NodeTopology& na = nodes[size_t(node_of_rank[size_t(a)])];
  const NodeTopology& nb = nodes[size_t(node_of_rank[size_t(b)])];
  if (a == b) return {PathClass::loc, topo::kGpuLocalGbs, topo::class_latency_us(PathClass::loc)};
  if (node_of_rank[size_t(a)] != node_of_rank[size_t(b)]) {
    // Across nodes: the slower of the two NICs (a rank without one: plain Ethernet figures).
    const Link a = topo::nic_link(na, ra.nic), b = topo::nic_link(nb, rb.nic);
    return {PathClass::net, std::min(a.bandwidth_gbs, b.bandwidth_gbs),
            std::max(a.latency_us, b.latency_us)};
  }
  int ea = endpoint(na, ra), eb = endpoint(na, rb);
  const bool cpu_only = ra.gpu < 0 && rb.gpu < 0;
  if (cpu_only && (ea < 0 || eb < 0 || ea == eb)) {
    // Two CPU processes on one NUMA node (or not pinned to one): shared memory through its CPU.
    return {PathClass::phb, topo::kHostCopyGbs, topo::kHostLatencyUs};
  }
  if (ea < 0 || eb < 0) return topo::default_link(PathClass::phb);
  return na.link(size_t(ea), size_t(eb));
}

std::vector<int> JobTopology::ranks_on(size_t node) const {
  std::vector<int> out;
  for (size_t r = 0; r < node_of_rank.size(); ++r)
    if (size_t(node_of_rank[r]) == node) out.push_back(int(r));
  return out;
}

std::string JobTopology::to_xml() const {
  std::string out = "<?xml version=\"1.0\"?>\n";
  out +=
      "<!-- Strata topology dump: docs/topology.md describes every element. Edit it and load it\n"
      "     back with STRATA_TOPO_FILE=<this file>, or give it to strata-topo as its input file\n"
      "     (XML comments may not hold a double hyphen, so the flag is not spelled out). -->\n";
  out += "<strata-topology version=\"1\">\n";
  for (const NodeTopology& n : nodes) out += topo::node_xml(n, 2);
  for (const RankPlacement& r : ranks) out += topo::rank_xml(r, 2);
  out += "</strata-topology>\n";
  return out;
}

JobTopology JobTopology::from_xml(std::string_view text, const std::string& source) {
  topo::XmlElement root = topo::parse_xml(text, source);
  if (root.name != "strata-topology")
    topo::fail(source + ": root element is <" + root.name + ">, not <strata-topology>");
  if (root.get("version", "1") != "1")
    topo::fail(source + ": dump version " + root.get("version") + " (this Strata reads version 1)");
  std::vector<NodeTopology> nodes;
  std::vector<RankPlacement> ranks;
  for (const topo::XmlElement& c : root.children) {
    if (c.name == "node") {
      nodes.push_back(topo::read_node(c, source));
      if (nodes.back().id.empty()) nodes.back().id = "node" + std::to_string(nodes.size() - 1);
    } else if (c.name == "rank") {
      ranks.push_back(topo::read_rank(c, source));
    }
  }
  std::sort(ranks.begin(), ranks.end(),
            [](const auto& x, const auto& y) { return x.rank < y.rank; });
  return build(std::move(nodes), std::move(ranks), source + ": ");
}

void JobTopology::save(const std::string& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << to_xml();
  if (!out.flush()) topo::fail(path + ": cannot write the topology dump");
}

JobTopology JobTopology::load(const std::string& path) {
  return from_xml(topo::read_topology_file(path), path);
}

}  // namespace strata
