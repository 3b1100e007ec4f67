// Strata's editable topology file: <strata-topology version="1"> holding <node> and <rank>
// elements (docs/topology.md has the format). The same elements are the blobs ranks exchange
// when the job view is gathered.
#pragma once

#include <string>
#include <string_view>

#include "strata/topology.hpp"
#include "topology/xml.hpp"

namespace strata::topo {

/// A <node> element describing `node`, each line indented by `indent` spaces.
std::string node_xml(const NodeTopology& node, int indent = 0);
/// Reads a <node> element. Pairs without a <link> get PHB on one NUMA node, else SYS (default
/// estimates); attributes left out take their defaults. Throws with `source` and the line.
NodeTopology read_node(const XmlElement& e, const std::string& source);

/// A <rank> element, with `extra` (already formatted attributes) appended.
std::string rank_xml(const RankPlacement& r, int indent = 0, std::string_view extra = {});
/// Reads a <rank> element.
RankPlacement read_rank(const XmlElement& e, const std::string& source);

/// The node of a dump this process should use: the only one, or the one whose id is this
/// process's node identity.
NodeTopology pick_node(const JobTopology& job, const std::string& source);

/// Shortest text that reads back as the same double ("15.75", "0.6").
std::string format_number(double v);

}  // namespace strata::topo
