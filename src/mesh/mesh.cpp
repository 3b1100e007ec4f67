// Mesh: Megatron's rank order, the checks of a shape against the job topology, and the groups.
#include "strata/mesh.hpp"

#include <algorithm>
#include <numeric>

#include "base/log.hpp"
#include "topology/errors.hpp"

namespace strata {
namespace {

constexpr std::array<Dim, kMeshDims> kOrder = {Dim::tp, Dim::cp, Dim::ep, Dim::dp, Dim::pp};

// Appends `item` to `s`, after `sep` unless `s` is empty.
void append(std::string& s, std::string_view sep, const std::string& item) {
  if (!s.empty()) s += sep;
  s += item;
}

std::string list(const std::vector<int>& v) {
  std::string s;
  for (int x : v) append(s, ",", std::to_string(x));
  return s;
}

}  // namespace

std::string_view dim_name(Dim d) {
  static constexpr std::array<std::string_view, kMeshDims> names = {"tp", "cp", "ep", "dp", "pp"};
  return names[size_t(d)];
}

int MeshShape::operator[](Dim d) const {
  const std::array<int, kMeshDims> v = {tp, cp, ep, dp, pp};
  return v[size_t(d)];
}

int& MeshShape::operator[](Dim d) {
  switch (d) {
    case Dim::tp:
      return tp;
    case Dim::cp:
      return cp;
    case Dim::ep:
      return ep;
    case Dim::dp:
      return dp;
    case Dim::pp:
      return pp;
  }
  return tp;
}

std::string MeshShape::to_string() const {
  std::string s;
  for (Dim d : kOrder) append(s, " ", std::string(dim_name(d)) + "=" + std::to_string((*this)[d]));
  return s;
}

MeshShape MeshShape::resolved(int world) const {
  MeshShape s = *this;
  for (Dim d : kOrder)
    if (s[d] < (d == Dim::dp ? 0 : 1))
      topo::fail("mesh " + to_string() + ": " + std::string(dim_name(d)) + "=" +
                 std::to_string(s[d]) + " must be at least 1" +
                 (d == Dim::dp ? " (or 0: fill)" : ""));
  const int fixed = s.tp * s.cp * s.ep * s.pp;
  if (s.dp == 0) {
    if (world % fixed != 0)
      topo::fail("mesh " + to_string() + ": tp*cp*ep*pp = " + std::to_string(fixed) +
                 " does not divide the world size " + std::to_string(world));
    s.dp = world / fixed;
  } else if (fixed * s.dp != world) {
    topo::fail("mesh " + to_string() + ": tp*cp*ep*dp*pp = " + std::to_string(fixed * s.dp) +
               " but the world has " + std::to_string(world) + " ranks");
  }
  return s;
}

namespace {
// The world size of a resolved shape; a size below 1 (an unresolved dp of 0) is refused, where
// it would divide by zero.
int resolved_world(const MeshShape& s) {
  int world = 1;
  for (Dim d : kOrder) {
    if (s[d] < 1)
      topo::fail("mesh " + s.to_string() + ": " + std::string(dim_name(d)) + "=" +
                 std::to_string(s[d]) + " is not resolved (call resolved(world) first)");
    world *= s[d];
  }
  return world;
}
}  // namespace

std::array<int, kMeshDims> MeshShape::coords(int world_rank) const {
  if (const int world = resolved_world(*this); world_rank < 0 || world_rank >= world)
    topo::fail("mesh " + to_string() + ": rank " + std::to_string(world_rank) +
               " is out of range [0, " + std::to_string(world) + ")");
  std::array<int, kMeshDims> c{};
  for (Dim d : kOrder) {  // tp fastest
    c[size_t(d)] = world_rank % (*this)[d];
    world_rank /= (*this)[d];
  }
  return c;
}

std::vector<int> MeshShape::group(int world_rank, std::initializer_list<Dim> dims) const {
  const std::array<int, kMeshDims> mine = coords(world_rank);
  const int world = resolved_world(*this);
  std::vector<int> members;
  for (int r = 0; r < world; ++r) {
    const std::array<int, kMeshDims> c = coords(r);
    bool same = true;
    for (Dim d : kOrder)
      if (std::find(dims.begin(), dims.end(), d) == dims.end() && c[size_t(d)] != mine[size_t(d)])
        same = false;
    if (same) members.push_back(r);
  }
  return members;
}

void validate_mesh(const MeshShape& shape, const JobTopology& job, const MeshOptions& options) {
  const int world = int(job.ranks.size());
  if (resolved_world(shape) != world)
    topo::fail("mesh " + shape.to_string() + ": its sizes multiply to " +
               std::to_string(resolved_world(shape)) + " but the job has " + std::to_string(world) +
               " ranks");
  size_t largest = 0;
  for (size_t n = 0; n < job.nodes.size(); ++n) largest = std::max(largest, job.ranks_on(n).size());
  if (size_t(shape.tp) > largest && !options.allow_cross_node_tp)
    topo::fail("mesh " + shape.to_string() + ": tp=" + std::to_string(shape.tp) +
               " is larger than a node (the largest of the " + std::to_string(job.nodes.size()) +
               " nodes has " + std::to_string(largest) + " ranks)");
  for (int first = 0; first < world; first += shape.tp) {
    const std::vector<int> g = shape.group(first, {Dim::tp});
    std::vector<int> nodes;
    for (int r : g)
      if (std::find(nodes.begin(), nodes.end(), job.node_of_rank[size_t(r)]) == nodes.end())
        nodes.push_back(job.node_of_rank[size_t(r)]);
    if (nodes.size() < 2) continue;
    std::string where;
    for (int n : nodes) {
      std::vector<int> on;
      for (int r : g)
        if (job.node_of_rank[size_t(r)] == n) on.push_back(r);
      append(where, " and ", job.nodes[size_t(n)].id + " (ranks " + list(on) + ")");
    }
    const std::string what = "mesh " + shape.to_string() + ": TP group of world ranks " + list(g) +
                             " spans nodes " + where;
    if (!options.allow_cross_node_tp)
      topo::fail(what +
                 "; TP traffic needs a node's fast links (MeshOptions::allow_cross_node_tp "
                 "permits it)");
    STRATA_LOG(WARN, "MESH") << what << " (allowed by allow_cross_node_tp)";
  }
}

MeshShape propose_mesh(const JobTopology& job, int pp) {
  const int world = int(job.ranks.size());
  if (pp < 1 || world % pp != 0)
    topo::fail("propose_mesh: pp=" + std::to_string(pp) + " does not divide the world size " +
               std::to_string(world));
  size_t smallest = SIZE_MAX;
  for (size_t n = 0; n < job.nodes.size(); ++n)
    smallest = std::min(smallest, job.ranks_on(n).size());
  // The fast island around the first rank of the smallest node: ranks whose GPU it reaches over
  // NVLink; a CPU rank's island is its whole node (shared memory).
  int island = int(smallest);
  for (size_t n = 0; n < job.nodes.size(); ++n) {
    const std::vector<int> on = job.ranks_on(n);
    if (on.size() != smallest || job.ranks[size_t(on[0])].gpu < 0) continue;
    island = 0;
    for (int r : on) island += job.link(on[0], r).cls <= PathClass::nvb;
    break;
  }
  MeshShape s;
  s.pp = pp;
  for (int tp = std::min<int>(island, int(smallest)); tp >= 1; --tp) {
    if (int(smallest) % tp == 0 && world % (tp * pp) == 0) {
      s.tp = tp;
      break;
    }
  }
  s.dp = world / (s.tp * pp);
  return s;
}

Mesh::Mesh(Communicator world, MeshShape shape, JobTopology topology, MeshOptions options)
    : world_(std::move(world)),
      shape_(shape),
      topology_(std::move(topology)),
      options_(std::move(options)),
      coords_(shape_.coords(world_.rank())) {}

Mesh Mesh::create(Communicator& world, const MeshShape& requested, const MeshOptions& options) {
  const MeshShape shape = requested.resolved(world.size());
  JobTopology job = JobTopology::gather(world);
  validate_mesh(shape, job, options);
  Mesh m(world, shape, std::move(job), options);
  for (Dim d : kOrder) m.group({d});
  STRATA_LOG(INFO, "MESH") << "rank " << world.rank() << ": " << shape.to_string();
  return m;
}

unsigned Mesh::key(std::initializer_list<Dim> dims) {
  unsigned k = 0;
  for (Dim d : dims) k |= 1u << unsigned(d);
  return k;
}

Communicator& Mesh::group(std::initializer_list<Dim> dims) {
  const unsigned k = key(dims);
  auto it = groups_.find(k);
  if (it == groups_.end()) it = groups_.emplace(k, make_group(dims)).first;
  return it->second;
}

std::vector<int> Mesh::group_ranks(std::initializer_list<Dim> dims) const {
  return shape_.group(world_.rank(), dims);
}

Communicator Mesh::make_group(std::initializer_list<Dim> dims) {
  if (dims.size() == 0) topo::fail("mesh: a group needs at least one dimension");
  // Color: my coordinates along the other dimensions; key: world rank (ascending order).
  int color = 0;
  std::string name;
  for (auto d = kOrder.rbegin(); d != kOrder.rend(); ++d) {
    if (std::find(dims.begin(), dims.end(), *d) != dims.end()) continue;
    color = color * shape_[*d] + coords_[size_t(*d)];
  }
  for (Dim d : kOrder)
    if (std::find(dims.begin(), dims.end(), d) != dims.end())
      append(name, "+", std::string(dim_name(d)));
  CommOptions opts;
  opts.name = options_.name + "/" + name;
  return world_.split(color, world_.rank(), opts);
}

}  // namespace strata
