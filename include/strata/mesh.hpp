// Mesh: the parallel layout of a training job. A trainer asks for tp x cp x ep x dp x pp and gets
// one Communicator per dimension (and per combination it asks for), laid out in Megatron's rank
// order so that the fastest-varying dimension, tp, sits on the fastest links (one node).
// docs/mesh.md explains the order, the checks against the topology and the proposed layouts.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "strata/communicator.hpp"
#include "strata/topology.hpp"

namespace strata {

/// The dimensions, in Megatron's order `tp-cp-ep-dp-pp`: tp varies fastest across world ranks,
/// pp slowest.
enum class Dim : uint8_t { tp, cp, ep, dp, pp };
constexpr int kMeshDims = 5;
/// "tp", "cp", "ep", "dp", "pp".
std::string_view dim_name(Dim d);

/// The size of every dimension. dp = 0 means "what the world leaves": world / (tp*cp*ep*pp).
struct MeshShape {
  int tp = 1, cp = 1, ep = 1, dp = 0, pp = 1;

  int operator[](Dim d) const;
  int& operator[](Dim d);
  /// "tp=2 cp=1 ep=1 dp=2 pp=2".
  std::string to_string() const;
  /// This shape on `world` ranks with dp filled in; throws strata::Error(invalid_argument) naming
  /// the numbers when a size is below 1 or the sizes do not multiply to the world size.
  MeshShape resolved(int world) const;
  /// Coordinates of `world_rank` along every dimension. The shape must be resolved (every size
  /// at least 1) and the rank in it, else strata::Error(invalid_argument).
  std::array<int, kMeshDims> coords(int world_rank) const;
  /// World ranks of the group along `dims` that holds `world_rank`, ascending (which is each
  /// member's rank in the group's Communicator). Checked as coords().
  std::vector<int> group(int world_rank, std::initializer_list<Dim> dims) const;
};

struct MeshOptions {
  /// A TP group spanning nodes is an error unless this is set; then it is a warning.
  bool allow_cross_node_tp = false;
  /// Prefix of the group names in logs and errors: "mesh/tp", "mesh/dp+cp", ...
  std::string name = "mesh";
};

/// Checks `shape` (resolved, as many ranks as the job) against the job: TP no larger than the
/// smallest node that holds a TP group and every TP group inside one node. Throws
/// strata::Error(invalid_argument) naming the group, its ranks and their nodes.
void validate_mesh(const MeshShape& shape, const JobTopology& job, const MeshOptions& options = {});

/// A layout for the job: tp = the ranks of a node joined by its fastest links (GPUs on one NVLink
/// island; the whole node for CPU ranks), never more than the smallest node; pp = `pp` stages
/// (across nodes); dp = the rest. Throws when `pp` does not divide what tp leaves.
MeshShape propose_mesh(const JobTopology& job, int pp = 1);

class Mesh {
 public:
  /// Collective over `world`: gathers the job topology, checks `shape` against it, and creates
  /// the group of every dimension.
  static Mesh create(Communicator& world, const MeshShape& shape, const MeshOptions& options = {});

  /// The shape, dp resolved.
  const MeshShape& shape() const { return shape_; }
  /// This rank's coordinate along `d`, which is its rank in group(d).
  int coord(Dim d) const { return coords_[size_t(d)]; }
  /// This rank's group along `d`.
  Communicator& group(Dim d) { return groups_.at(key({d})); }
  /// This rank's group along several dimensions (e.g. {Dim::dp, Dim::cp}). The first request of
  /// a combination is collective over the world: every rank makes it, in the same order.
  Communicator& group(std::initializer_list<Dim> dims);
  /// World ranks of group(dims), in group-rank order. No communication.
  std::vector<int> group_ranks(std::initializer_list<Dim> dims) const;
  const JobTopology& topology() const { return topology_; }
  Communicator& world() { return world_; }

 private:
  Mesh(Communicator world, MeshShape shape, JobTopology topology, MeshOptions options);
  static unsigned key(std::initializer_list<Dim> dims);
  Communicator make_group(std::initializer_list<Dim> dims);

  Communicator world_;
  MeshShape shape_;
  JobTopology topology_;
  MeshOptions options_;
  std::array<int, kMeshDims> coords_{};
  std::map<unsigned, Communicator> groups_;  // by bit set of dims
};

}  // namespace strata
