// The XML that topology loads itself (NCCL's topology format and Strata's own dump), read with
// libxml2 into nested elements with attributes; text content and comments are dropped. hwloc's
// format goes to hwloc, which has its own reader.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace strata::topo {

struct XmlElement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;
  std::vector<XmlElement> children;
  int line = 0;  ///< where the element starts, for error messages

  /// The attribute's value, or nullptr when absent.
  const std::string* find(std::string_view key) const;
  /// The attribute's value, or `fallback` when absent.
  std::string get(std::string_view key, std::string_view fallback = {}) const;
};

/// The most a topology file may hold: the largest real ones (a DGX-2's hwloc XML) are under 1 MiB.
constexpr size_t kMaxTopologyFileBytes = 64 << 20;

/// The text of the topology file at `path`, read up to kMaxTopologyFileBytes: a longer file
/// (`/dev/zero`, a log given by mistake) is refused, as is one that cannot be opened, naming the
/// path. Throws strata::Error(invalid_argument).
std::string read_topology_file(const std::string& path);

/// Parses a whole document. Throws strata::Error(invalid_argument): "<source>: line N: <what>".
XmlElement parse_xml(std::string_view text, const std::string& source);

/// Name of the document's root element (after the prolog, comments and DOCTYPE), or "" when there
/// is none; cheap enough to sniff a file's format.
std::string root_element_name(std::string_view text);

/// `s` escaped for use inside a double-quoted attribute value.
std::string xml_escape(std::string_view s);

}  // namespace strata::topo
