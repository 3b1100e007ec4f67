// strata.Error (strata::Error with its context as attributes), strata.Mesh, and the topology as
// plain dicts: the parts of the module that are conversions rather than operations.
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "strata/error.hpp"
#include "strata/mesh.hpp"
#include "strata/topology.hpp"

namespace strata::py {
namespace {

using namespace nb::literals;

// dict_of("key", value, "key2", value2, ...): a dict of converted values.
inline void fill(nb::dict&) {}
template <typename V, typename... Rest>
void fill(nb::dict& d, const char* key, V&& value, Rest&&... rest) {
  d[key] = std::forward<V>(value);
  fill(d, std::forward<Rest>(rest)...);
}
template <typename... KV>
nb::dict dict_of(KV&&... kv) {
  nb::dict d;
  fill(d, std::forward<KV>(kv)...);
  return d;
}

// The exception type, created once at import. Never freed: an exception being raised during
// interpreter shutdown must still find it.
PyObject* g_error_type = nullptr;

const char* code_name(ErrorCode c) {
  switch (c) {
    case ErrorCode::invalid_argument:
      return "invalid_argument";
    case ErrorCode::timeout:
      return "timeout";
    case ErrorCode::peer_failure:
      return "peer_failure";
    case ErrorCode::transport:
      return "transport";
    case ErrorCode::aborted:
      return "aborted";
    case ErrorCode::internal:
      return "internal";
  }
  return "internal";
}

// Sets a Python strata.Error carrying e's code and context (None where the context is unset).
void raise_error(const Error& e) {
  nb::object exc = nb::steal(PyObject_CallOneArg(g_error_type, nb::str(e.what()).ptr()));
  if (!exc.is_valid()) return;  // the constructor failed: its exception is already set
  const ErrorContext& w = e.where();
  auto int_or_none = [](int64_t v) { return v < 0 ? nb::none() : nb::object(nb::int_(v)); };
  auto str_or_none = [](const std::string& s) {
    return s.empty() ? nb::none() : nb::object(nb::str(s.c_str(), s.size()));
  };
  exc.attr("code") = code_name(e.code());
  exc.attr("rank") = int_or_none(w.rank);
  exc.attr("peer") = int_or_none(w.peer);
  exc.attr("group") = str_or_none(w.group);
  exc.attr("op") = str_or_none(w.op);
  exc.attr("seq") = int_or_none(w.seq);
  PyErr_SetObject(g_error_type, exc.ptr());
}

nb::dict node_dict(const NodeTopology& n) {
  nb::list numa, devices, links;
  for (const auto& x : n.numa) {
    numa.append(dict_of("os_index", x.os_index, "memory_bytes", x.memory_bytes, "cpus", x.cpus,
                        "package", x.package));
  }
  for (const auto& d : n.devices) {
    nb::dict dev =
        dict_of("kind", device_kind_name(d.kind), "name", d.name, "index", d.index, "numa", d.numa,
                "pci_bus_id", d.pci_bus_id, "model", d.model, "cpus", d.cpus);
    if (d.kind == DeviceKind::nic) {
      dev["nic_kind"] = nic_kind_name(d.nic_kind);
      dev["rate_gbps"] = d.rate_gbps;
    }
    devices.append(dev);
  }
  // Between distinct devices only; `a` and `b` index `devices`.
  for (size_t a = 0; a < n.devices.size(); ++a) {
    for (size_t b = 0; b < n.devices.size(); ++b) {
      if (a == b || n.links.size() != n.devices.size() * n.devices.size()) continue;
      const Link& l = n.link(a, b);
      links.append(dict_of("a", a, "b", b, "class", path_class_name(l.cls), "bandwidth_gbs",
                           l.bandwidth_gbs, "latency_us", l.latency_us));
    }
  }
  return dict_of("id", n.id, "hostname", n.hostname, "source", n.source, "cpu_model", n.cpu_model,
                 "packages", n.packages, "cores", n.cores, "pus", n.pus, "numa", numa, "devices",
                 devices, "links", links);
}

nb::dict job_dict(const JobTopology& job) {
  nb::list nodes, ranks;
  for (const auto& n : job.nodes) nodes.append(node_dict(n));
  for (const auto& r : job.ranks) {
    ranks.append(dict_of("rank", r.rank, "node_id", r.node_id, "hostname", r.hostname, "local_rank",
                         r.local_rank, "cpus", r.cpus, "numa", r.numa, "gpu", r.gpu, "nic", r.nic));
  }
  return dict_of("nodes", nodes, "ranks", ranks, "node_of_rank", job.node_of_rank);
}

// Mesh dimensions named as in Megatron: "tp" or ("dp", "cp").
using DimsArg = std::variant<std::string, std::vector<std::string>>;

Dim parse_dim(const std::string& name) {
  for (int i = 0; i < kMeshDims; ++i) {
    if (dim_name(Dim(i)) == name) return Dim(i);
  }
  throw nb::value_error(
      ("strata.Mesh: unknown dimension '" + name + "' (expected tp, cp, ep, dp or pp)").c_str());
}

std::vector<Dim> parse_dims(const DimsArg& arg) {
  std::vector<std::string> names;
  if (const auto* one = std::get_if<std::string>(&arg))
    names = {*one};
  else
    names = std::get<std::vector<std::string>>(arg);
  if (names.empty() || names.size() > size_t(kMeshDims)) {
    throw nb::value_error("strata.Mesh: give 1 to 5 dimensions");
  }
  std::vector<Dim> dims;
  for (const auto& n : names) {
    const Dim d = parse_dim(n);
    for (Dim seen : dims) {
      if (seen == d)
        throw nb::value_error(("strata.Mesh: dimension '" + n + "' given twice").c_str());
    }
    dims.push_back(d);
  }
  return dims;
}

// The C++ API takes std::initializer_list<Dim>, which only a braced list can make.
template <typename F>
auto with_dims(const std::vector<Dim>& d, F&& f) {
  switch (d.size()) {
    case 1:
      return f({d[0]});
    case 2:
      return f({d[0], d[1]});
    case 3:
      return f({d[0], d[1], d[2]});
    case 4:
      return f({d[0], d[1], d[2], d[3]});
    default:
      return f({d[0], d[1], d[2], d[3], d[4]});
  }
}

nb::dict shape_dict(const MeshShape& s) {
  nb::dict d;
  for (int i = 0; i < kMeshDims; ++i)
    d[nb::str(dim_name(Dim(i)).data(), dim_name(Dim(i)).size())] = s[Dim(i)];
  return d;
}

}  // namespace

void register_errors(nb::module_& m) {
  // Class-level defaults, so an Error raised from Python code still has every attribute.
  nb::dict defaults = dict_of("code", "internal", "rank", nb::none(), "peer", nb::none(), "group",
                              nb::none(), "op", nb::none(), "seq", nb::none());
  g_error_type = PyErr_NewExceptionWithDoc(
      "strata.Error",
      "A failed Strata operation. Attributes: code ('invalid_argument', 'timeout', "
      "'peer_failure', 'transport', 'aborted' or 'internal'), rank, peer, group, op, seq "
      "(None where they do not apply).",
      PyExc_RuntimeError, defaults.ptr());
  if (!g_error_type) throw nb::python_error();
  m.attr("Error") = nb::handle(g_error_type);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      raise_error(e);
    }
  });
}

void register_topology(nb::module_& m) {
  m.def(
      "node_topology",
      [] {
        NodeTopology n;
        {
          nb::gil_scoped_release unlocked;  // hwloc detection takes a while
          n = detect_node();
        }
        return node_dict(n);
      },
      "This node's hardware (detect_node(): STRATA_TOPO_FILE or live hwloc) as a dict: id, "
      "hostname, source, cpu_model, packages, cores, pus, numa, devices, links.");
}

void register_mesh(nb::module_& m) {
  nb::class_<Mesh>(m, "Mesh",
                   "The parallel layout tp x cp x ep x dp x pp of a job (Megatron rank order), "
                   "with one communicator per dimension.")
      .def(
          "__init__",
          [](Mesh* self, Communicator& world, int tp, int pp, int dp, int cp, int ep,
             bool allow_cross_node_tp) {
            MeshShape shape;
            shape.tp = tp, shape.pp = pp, shape.dp = dp, shape.cp = cp, shape.ep = ep;
            MeshOptions options;
            options.allow_cross_node_tp = allow_cross_node_tp;
            nb::gil_scoped_release unlocked;  // collective over world
            new (self) Mesh(Mesh::create(world, shape, options));
          },
          "world"_a, nb::kw_only(), "tp"_a = 1, "pp"_a = 1, "dp"_a = 0, "cp"_a = 1, "ep"_a = 1,
          "allow_cross_node_tp"_a = false,
          "Collective over world. dp=0 takes what the other dimensions leave.")
      .def(
          "group",
          [](Mesh& mesh, const DimsArg& dims) {
            const auto d = parse_dims(dims);
            nb::gil_scoped_release unlocked;  // the first request of a combination is collective
            return with_dims(
                d, [&](std::initializer_list<Dim> l) { return Communicator(mesh.group(l)); });
          },
          "dims"_a,
          "This rank's communicator along one dimension ('tp') or several (('dp', 'cp')). The "
          "first request of a combination is collective over the world, in the same order on "
          "every rank.")
      .def(
          "group_ranks",
          [](const Mesh& mesh, const DimsArg& dims) {
            return with_dims(parse_dims(dims),
                             [&](std::initializer_list<Dim> l) { return mesh.group_ranks(l); });
          },
          "dims"_a, "World ranks of group(dims) in group-rank order. No communication.")
      .def(
          "coord",
          [](const Mesh& mesh, const std::string& dim) { return mesh.coord(parse_dim(dim)); },
          "dim"_a, "This rank's coordinate along dim, which is its rank in group(dim).")
      .def_prop_ro(
          "shape", [](const Mesh& mesh) { return shape_dict(mesh.shape()); },
          "The sizes, dp resolved: {'tp': ..., 'cp': ..., 'ep': ..., 'dp': ..., 'pp': ...}.")
      .def_prop_ro("world", [](Mesh& mesh) { return Communicator(mesh.world()); })
      .def_prop_ro(
          "topology", [](const Mesh& mesh) { return job_dict(mesh.topology()); },
          "The job topology gathered at creation, as Communicator.job_topology() gives it.");
}

nb::dict gather_job_topology(Communicator& comm) {
  return job_dict(interruptible(comm, [&] { return JobTopology::gather(comm); }));
}

}  // namespace strata::py
