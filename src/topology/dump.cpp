#include "topology/dump.hpp"

#include <charconv>
#include <map>

#include "bootstrap/node_identity.hpp"
#include "topology/cpuset.hpp"
#include "topology/errors.hpp"
#include "topology/estimates.hpp"

namespace strata::topo {
namespace {

// Appends ` key="value"` to an element being written.
void attr(std::string& out, std::string_view key, std::string_view value) {
  out += ' ';
  out += key;
  out += "=\"";
  out += xml_escape(value);
  out += '"';
}
void attr(std::string& out, std::string_view key, long long value) {
  attr(out, key, std::to_string(value));
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += ',';
    out += s;
  }
  return out;
}

// Typed attribute reads that name the file, line and attribute when the text is wrong.
class Attrs {
 public:
  Attrs(const XmlElement& e, const std::string& source) : e_(e), source_(source) {}

  std::string text(std::string_view key, std::string_view fallback = {}) const {
    return e_.get(key, fallback);
  }
  std::string required(std::string_view key) const {
    const std::string* v = e_.find(key);
    if (!v) bad("<" + e_.name + "> needs attribute " + std::string(key));
    return *v;
  }
  long long integer(std::string_view key, long long fallback) const {
    const std::string* v = e_.find(key);
    if (!v) return fallback;
    long long out = 0;
    auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
    if (ec != std::errc() || p != v->data() + v->size()) bad(what(key, *v, "an integer"));
    return out;
  }
  double number(std::string_view key, double fallback) const {
    const std::string* v = e_.find(key);
    if (!v) return fallback;
    double out = 0;
    auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
    if (ec != std::errc() || p != v->data() + v->size() || out < 0)
      bad(what(key, *v, "a non-negative number"));
    return out;
  }
  std::string cpus(std::string_view key) const {
    std::string v = e_.get(key);
    CpuSet s;
    if (!CpuSet::parse_list(v, s)) bad(what(key, v, "a CPU list like 0-3,8"));
    return v;
  }
  template <typename Enum, size_t N>
  Enum choice(std::string_view key, const std::string_view (&names)[N], Enum fallback) const {
    const std::string* v = e_.find(key);
    if (!v) return fallback;
    for (size_t i = 0; i < N; ++i)
      if (names[i] == *v) return Enum(i);
    std::string options;
    for (auto n : names) options += (options.empty() ? "" : ", ") + std::string(n);
    bad(what(key, *v, "one of " + options));
  }
  [[noreturn]] void bad(const std::string& msg) const {
    fail(source_ + ": line " + std::to_string(e_.line) + ": " + msg);
  }

 private:
  static std::string what(std::string_view key, const std::string& v, const std::string& expected) {
    return "attribute " + std::string(key) + "=\"" + v + "\" is not " + expected;
  }
  const XmlElement& e_;
  const std::string& source_;
};

constexpr std::string_view kKinds[] = {"cpu", "gpu", "nic", "nvswitch"};
constexpr std::string_view kNicKinds[] = {"infiniband", "roce",     "omnipath",
                                          "efa",        "ethernet", "unknown"};
constexpr std::string_view kPorts[] = {"unknown", "down", "active"};

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

void write_device(std::string& out, const NodeTopology& node, const Device& d,
                  const std::string& pad) {
  out += pad + "  <device";
  attr(out, "name", d.name);
  attr(out, "kind", device_kind_name(d.kind));
  attr(out, "index", d.index);
  if (!d.pci_bus_id.empty()) attr(out, "pci", d.pci_bus_id);
  if (!d.model.empty()) attr(out, "model", d.model);
  attr(out, "numa", d.numa);
  if (!d.cpus.empty()) attr(out, "cpus", d.cpus);
  if (d.pcie_gbs > 0) attr(out, "pcie_gbs", format_number(d.pcie_gbs));
  if (!d.os_names.empty()) attr(out, "os_names", join(d.os_names));
  if (!d.uuid.empty()) attr(out, "uuid", d.uuid);
  if (d.kind == DeviceKind::nic) {
    attr(out, "nic_kind", nic_kind_name(d.nic_kind));
    attr(out, "port", kPorts[size_t(d.port)]);
    if (d.rate_gbps > 0) attr(out, "rate_gbps", format_number(d.rate_gbps));
  }
  if (d.nearest_nic >= 0) attr(out, "nic", node.devices[size_t(d.nearest_nic)].name);
  out += "/>\n";
}

}  // namespace

std::string format_number(double v) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, p) : "0";
}

std::string node_xml(const NodeTopology& node, int indent) {
  const std::string pad(size_t(indent), ' ');
  std::string out = pad + "<node";
  attr(out, "id", node.id);
  attr(out, "hostname", node.hostname);
  attr(out, "source", node.source);
  if (!node.cpu_model.empty()) attr(out, "cpu_model", node.cpu_model);
  attr(out, "packages", node.packages);
  attr(out, "cores", node.cores);
  attr(out, "pus", node.pus);
  attr(out, "nvlink_known", node.nvlink_known ? "yes" : "no");
  out += ">\n";
  for (const NumaNode& n : node.numa) {
    out += pad + "  <numa";
    attr(out, "os_index", n.os_index);
    attr(out, "memory", (long long)n.memory_bytes);
    attr(out, "cpus", n.cpus);
    attr(out, "package", n.package);
    out += "/>\n";
  }
  if (!node.numa_distance.empty()) {
    std::string values;
    for (uint32_t v : node.numa_distance) {
      if (!values.empty()) values += ' ';
      values += std::to_string(v);
    }
    out += pad + "  <numa_distance";
    attr(out, "values", values);
    out += "/>\n";
  }
  for (const Device& d : node.devices) write_device(out, node, d, pad);
  const size_t n = node.devices.size();
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = a + 1; b < n; ++b) {
      const Link& l = node.link(a, b);
      out += pad + "  <link";
      attr(out, "a", node.devices[a].name);
      attr(out, "b", node.devices[b].name);
      attr(out, "class", path_class_name(l.cls));
      attr(out, "bw", format_number(l.bandwidth_gbs));
      attr(out, "lat", format_number(l.latency_us));
      out += "/>\n";
    }
  }
  out += pad + "</node>\n";
  return out;
}

NodeTopology read_node(const XmlElement& e, const std::string& source) {
  Attrs at(e, source);
  if (e.name != "node") at.bad("expected <node>, found <" + e.name + ">");
  NodeTopology node;
  node.id = at.text("id");
  node.hostname = at.text("hostname");
  node.source = at.text("source", "Strata dump " + source);
  node.cpu_model = at.text("cpu_model");
  node.packages = int(at.integer("packages", 0));
  node.cores = int(at.integer("cores", 0));
  node.pus = int(at.integer("pus", 0));
  node.nvlink_known = at.text("nvlink_known", "no") == "yes";
  std::map<std::string, size_t> by_name;
  std::vector<std::pair<const XmlElement*, std::string>> wanted_nic;
  for (const XmlElement& c : e.children) {
    Attrs ca(c, source);
    if (c.name == "numa") {
      NumaNode n;
      n.os_index = int(ca.integer("os_index", long(node.numa.size())));
      n.memory_bytes = uint64_t(ca.integer("memory", 0));
      n.cpus = ca.cpus("cpus");
      n.package = int(ca.integer("package", -1));
      node.numa.push_back(n);
    } else if (c.name == "numa_distance") {
      std::string values = ca.required("values");
      for (char& ch : values) ch = ch == ' ' ? ',' : ch;  // space-separated, commas welcome
      for (const std::string& v : split_commas(values)) {
        uint32_t d = 0;
        auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
        if (ec != std::errc() || p != v.data() + v.size())
          ca.bad("numa_distance value '" + v + "' is not a number");
        node.numa_distance.push_back(d);
      }
    } else if (c.name == "device") {
      Device d;
      d.name = ca.required("name");
      d.kind = ca.choice("kind", kKinds, DeviceKind::cpu);
      d.index = int(ca.integer("index", -1));
      d.pci_bus_id = ca.text("pci");
      d.model = ca.text("model");
      d.numa = int(ca.integer("numa", -1));
      d.cpus = ca.cpus("cpus");
      d.pcie_gbs = ca.number("pcie_gbs", 0);
      d.os_names = split_commas(ca.text("os_names"));
      d.uuid = ca.text("uuid");
      d.nic_kind = ca.choice("nic_kind", kNicKinds, NicKind::unknown);
      d.port = ca.choice("port", kPorts, PortState::unknown);
      d.rate_gbps = ca.number("rate_gbps", 0);
      if (!by_name.emplace(d.name, node.devices.size()).second)
        ca.bad("a second device named " + d.name);
      if (c.find("nic")) wanted_nic.emplace_back(&c, c.get("nic"));
      node.devices.push_back(std::move(d));
    }
  }
  if (!node.numa_distance.empty() &&
      node.numa_distance.size() != node.numa.size() * node.numa.size())
    at.bad("numa_distance has " + std::to_string(node.numa_distance.size()) + " values for " +
           std::to_string(node.numa.size()) + " NUMA nodes");
  // Links: listed pairs as written, the rest from NUMA placement.
  const size_t n = node.devices.size();
  node.links.assign(n * n, Link{});
  std::vector<bool> set(n * n, false);
  for (const XmlElement& c : e.children) {
    if (c.name != "link") continue;
    Attrs ca(c, source);
    auto end = [&](const char* key) {
      std::string name = ca.required(key);
      auto it = by_name.find(name);
      if (it == by_name.end()) ca.bad("link to unknown device " + name);
      return it->second;
    };
    size_t a = end("a"), b = end("b");
    PathClass cls;
    try {
      cls = path_class_from_name(ca.required("class"));
    } catch (const std::exception&) {
      ca.bad("unknown link class '" + c.get("class") + "'");
    }
    Link def = default_link(cls);
    Link l{cls, ca.number("bw", def.bandwidth_gbs), ca.number("lat", def.latency_us)};
    node.links[a * n + b] = node.links[b * n + a] = l;
    set[a * n + b] = set[b * n + a] = true;
  }
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = 0; b < n; ++b) {
      if (set[a * n + b]) continue;
      const Device& da = node.devices[a];
      const Device& db = node.devices[b];
      if (a == b)
        node.links[a * n + b] = self_link(da);
      else if (da.numa < 0 || db.numa < 0 || da.numa == db.numa)
        node.links[a * n + b] = default_link(PathClass::phb);
      else
        node.links[a * n + b] = default_link(PathClass::sys);
    }
  }
  for (auto& [c, name] : wanted_nic) {
    auto it = by_name.find(name);
    if (it == by_name.end() || node.devices[it->second].kind != DeviceKind::nic)
      Attrs(*c, source).bad("nic=\"" + name + "\" is not a NIC of this node");
    node.devices[by_name.at(c->get("name"))].nearest_nic = int(it->second);
  }
  return node;
}

std::string rank_xml(const RankPlacement& r, int indent, std::string_view extra) {
  std::string out(size_t(indent), ' ');
  out += "<rank";
  attr(out, "rank", r.rank);
  attr(out, "node", r.node_id);
  attr(out, "hostname", r.hostname);
  attr(out, "local_rank", r.local_rank);
  attr(out, "cpus", r.cpus);
  attr(out, "numa", r.numa);
  attr(out, "gpu", r.gpu);
  attr(out, "nic", r.nic);
  out += extra;
  out += "/>\n";
  return out;
}

RankPlacement read_rank(const XmlElement& e, const std::string& source) {
  Attrs at(e, source);
  if (e.name != "rank") at.bad("expected <rank>, found <" + e.name + ">");
  RankPlacement r;
  r.rank = int(at.integer("rank", -1));
  if (r.rank < 0) at.bad("<rank> needs a rank=\"N\" of at least 0");
  r.node_id = at.required("node");
  r.hostname = at.text("hostname");
  r.local_rank = int(at.integer("local_rank", 0));
  r.cpus = at.cpus("cpus");
  r.numa = int(at.integer("numa", -1));
  r.gpu = int(at.integer("gpu", -1));
  r.nic = at.text("nic");
  return r;
}

NodeTopology pick_node(const JobTopology& job, const std::string& source) {
  if (job.nodes.empty()) fail(source + ": the dump describes no <node>");
  if (job.nodes.size() == 1) return job.nodes.front();
  const std::string me = bootstrap::node_identity();
  std::string ids;
  for (const NodeTopology& n : job.nodes) {
    if (n.id == me) return n;
    ids += (ids.empty() ? "" : ", ") + n.id;
  }
  fail(source + ": no node with id '" + me +
       "' (this process's node identity; set STRATA_NODE_ID "
       "to one of: " +
       ids + ")");
}

}  // namespace strata::topo
