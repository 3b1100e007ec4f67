// Topology: what a node's hardware looks like (NUMA nodes, GPUs, NICs, NVSwitches), how each pair
// of its devices is connected (NCCL's path classes, each with a bandwidth and latency estimate),
// where each rank runs, and the job-wide view assembled from every rank's report.
// docs/topology.md explains what is detected, where the estimates come from, and the dump format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

class Communicator;

/// How two endpoints are connected, best first (a smaller value is a better path). The names
/// follow NCCL and `nvidia-smi topo -m`.
enum class PathClass : uint8_t {
  loc,  ///< LOC: the same device
  nvl,  ///< NVL: a direct NVLink (or AMD xGMI) connection
  nvb,  ///< NVB: NVLink through NVSwitches
  pix,  ///< PIX: PCIe through at most one PCIe switch
  pxb,  ///< PXB: PCIe through several PCIe switches, without crossing a host bridge
  phb,  ///< PHB: through a PCIe host bridge / the CPU of one NUMA node
  sys,  ///< SYS: across the interconnect between NUMA nodes or sockets (UPI, xGMI, X-Bus)
  net,  ///< NET: across the network, between nodes
};

/// Three-letter name of a class: "LOC", "NVL", "NVB", "PIX", "PXB", "PHB", "SYS", "NET".
std::string_view path_class_name(PathClass c);
/// The class named `name` (any case); throws strata::Error(invalid_argument) for other names.
PathClass path_class_from_name(std::string_view name);

/// A path's class with its estimated bandwidth and latency: relative figures for the cost model,
/// not measurements (docs/topology.md gives the source of every number).
struct Link {
  PathClass cls = PathClass::sys;  ///< what kind of path it is
  double bandwidth_gbs = 0;        ///< GB/s (1e9 bytes per second), one direction
  double latency_us = 0;           ///< microseconds for a small message
};

/// What a device of a node is. A `cpu` device stands for one NUMA node's cores and memory.
enum class DeviceKind : uint8_t { cpu, gpu, nic, nvswitch };
/// Name of a device kind: "cpu", "gpu", "nic", "nvswitch".
std::string_view device_kind_name(DeviceKind k);

/// The network a NIC serves.
enum class NicKind : uint8_t { infiniband, roce, omnipath, efa, ethernet, unknown };
/// Name of a NIC kind: "infiniband", "roce", "omnipath", "efa", "ethernet", "unknown".
std::string_view nic_kind_name(NicKind k);

/// State of a NIC's (first) port; init/armed ports count as down.
enum class PortState : uint8_t { unknown, down, active };

/// One device of a node. Fields that do not apply to its kind stay at their defaults.
struct Device {
  DeviceKind kind = DeviceKind::cpu;  ///< what it is
  int index = -1;          ///< per kind: NUMA OS index (cpu), GPU number in PCI bus order (gpu),
                           ///< NIC number (nic), switch number (nvswitch)
  std::string name;        ///< unique on the node: "CPU0", "GPU3", "mlx5_0", "NVSwitch5"
  std::string pci_bus_id;  ///< "0000:3b:00.0"; empty when not a PCI device
  std::string model;       ///< model name when the source gives one
  int numa = -1;           ///< OS index of the NUMA node it hangs off; -1: unknown or whole machine
  std::string cpus;        ///< CPUs local to it, as an OS-index list ("0-23,48-71")
  double pcie_gbs = 0;     ///< PCIe link bandwidth in GB/s; 0 when unknown
  std::vector<std::string> os_names;    ///< other names: "cuda0", "nvml0", network interface "ib0"
  std::string uuid;                     ///< gpu: "GPU-..." when known
  NicKind nic_kind = NicKind::unknown;  ///< nic: the network it serves
  PortState port = PortState::unknown;  ///< nic: state of its first port
  double rate_gbps = 0;                 ///< nic: link rate in Gb/s as reported; 0 when unknown
  int nearest_nic = -1;  ///< cpu and gpu: index in NodeTopology::devices of the NIC chosen for it
};

/// A NUMA node: its memory and the CPUs that are local to it.
struct NumaNode {
  int os_index = 0;           ///< the OS's number for it
  uint64_t memory_bytes = 0;  ///< 0 when the source does not say
  std::string cpus;           ///< OS-index list
  int package = -1;           ///< logical index of its package (socket); -1 when unknown
};

/// One node's hardware, detected live or loaded from a file.
struct NodeTopology {
  std::string id;         ///< node identity (hostname/boot id, or STRATA_NODE_ID); may be empty
  std::string hostname;   ///< as the machine or the file names itself; may be empty
  std::string source;     ///< "live (hwloc ...)", or the format and path of the file it came from
  std::string cpu_model;  ///< the first package's CPU model, when known
  int packages = 0, cores = 0, pus = 0;  ///< counts; 0 where the source does not say
  std::vector<NumaNode> numa;            ///< in the OS's order
  std::vector<uint32_t> numa_distance;  ///< numa.size()^2 relative latencies (10 = local), or empty
  std::vector<Device> devices;          ///< cpu devices (one per NUMA node), gpus, nics, nvswitches
  std::vector<Link> links;              ///< devices.size()^2, row-major; see link()
  bool nvlink_known = false;  ///< NVLink was visible (NVML, a bandwidth matrix, or NCCL <nvlink>)

  /// How devices[a] and devices[b] are connected.
  const Link& link(size_t a, size_t b) const { return links[a * devices.size() + b]; }
  /// Indexes into `devices` of every device of kind `k`, in index order.
  std::vector<size_t> of_kind(DeviceKind k) const;
  /// Index into `devices` of the device named `name`, or -1.
  int find(std::string_view name) const;
  /// Index into `devices` of GPU number `gpu`, or -1.
  int gpu(int gpu) const;
  /// Index into `devices` of the cpu device of NUMA node `os_index`, or -1.
  int cpu(int os_index) const;
  /// Index into `devices` of the best NIC for code running on `cpus` (an OS-index list): RDMA
  /// before Ethernet, active ports first, then the nearest, then the fastest; `spread` picks among
  /// equally good NICs (pass the local rank to spread ranks over them). -1 when there is no NIC.
  int nearest_nic(const std::string& cpus, int spread = 0) const;
};

/// This node: read from STRATA_TOPO_FILE when set (any format load_node reads), else detected live
/// with hwloc (once a process: the machine does not change under it), plus NVLink from NVML when
/// an NVIDIA driver is present. Its `id` is this process's node identity.
NodeTopology detect_node();
/// A node read from `path`: hwloc XML, NCCL topology XML (`<system version="1">`), or a Strata
/// dump (the node whose id is this process's node identity, or the only one). Throws
/// strata::Error(invalid_argument) naming the file and what was wrong.
NodeTopology load_node(const std::string& path);

/// Where one rank runs.
struct RankPlacement {
  int rank = 0;          ///< its rank in the job
  std::string node_id;   ///< hostname + boot id, or STRATA_NODE_ID
  std::string hostname;  ///< the machine's name, for people
  int local_rank = 0;    ///< the launcher's local rank; in a JobTopology, its order on its node
  std::string cpus;      ///< the CPUs it may run on (OS-index list)
  int numa = -1;         ///< NUMA node holding all its CPUs; -1 when they span several
  int gpu = -1;          ///< its GPU number on the node; -1 for none
  std::string nic;       ///< name of its NIC on the node; empty for none
};

/// This process's placement as rank `rank` on `node`: node identity, CPU affinity, the GPU picked
/// by LOCAL_RANK (or the launcher's equivalent) among CUDA_VISIBLE_DEVICES, and that GPU's NIC
/// (or the NIC nearest its CPUs).
RankPlacement place_rank(const NodeTopology& node, int rank);

/// Exchanges one byte blob per rank: returns every rank's blob, indexed by rank. Collective.
using AllGatherBytes =
    std::function<std::vector<std::vector<uint8_t>>(const std::vector<uint8_t>& mine)>;

/// The whole job: the distinct nodes, where every rank runs, and how any two ranks are connected.
struct JobTopology {
  std::vector<NodeTopology> nodes;   ///< in order of their lowest rank
  std::vector<RankPlacement> ranks;  ///< indexed by rank; local_rank is the order on its node
  std::vector<int> node_of_rank;     ///< index into `nodes` of every rank's node

  /// Collective: builds the view from every rank's placement and node, with two calls of
  /// `allgather` (placements, then one node description per node, sent by its lowest rank).
  static JobTopology gather(const NodeTopology& mine, const RankPlacement& me,
                            const AllGatherBytes& allgather);
  /// Collective over `comm`: detect_node(), place_rank() with this rank's number in `comm`, and
  /// gather() over `comm`. Ranks and local ranks are numbered as in `comm`.
  static JobTopology gather(Communicator& comm);
  /// The view of a job with only the given ranks and nodes (node_id of each rank must match one
  /// node's id); recomputes local ranks. Throws strata::Error(invalid_argument) on a mismatch.
  static JobTopology assemble(std::vector<NodeTopology> nodes, std::vector<RankPlacement> ranks);
  /// How ranks a and b are connected: their GPUs' path on one node (or their NUMA nodes' for
  /// CPU-only ranks), NET with the slower NIC's rate across nodes.
  Link link(int a, int b) const;
  /// The ranks on nodes[node], in rank order.
  std::vector<int> ranks_on(size_t node) const;

  /// The editable dump (XML, documented in docs/topology.md).
  std::string to_xml() const;
  /// Reads a dump; `source` names it in errors. Throws strata::Error(invalid_argument).
  static JobTopology from_xml(std::string_view text, const std::string& source);
  /// to_xml() written to `path`.
  void save(const std::string& path) const;
  /// from_xml() of the file at `path`.
  static JobTopology load(const std::string& path);
};

}  // namespace strata
