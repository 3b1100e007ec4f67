#include "inputs.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <stdexcept>
#include <vector>

#include "model/gpt_layers.hpp"
#include "model/gpt_model.hpp"

namespace plan {
namespace {

// What a device kind brings: memory, peak compute per precision, links. Peaks are the vendors'
// dense figures (H100 SXM: 989 TFLOP/s bf16, 494 tf32; A100: 312, 156); NVLink is one direction
// per GPU through NVSwitch (NVLink 4: 450 GB/s, NVLink 3: 300 GB/s); the NIC one 400 or 200 Gb/s
// InfiniBand port per GPU, as on DGX H100 and A100 nodes.
struct DeviceKind {
  const char* name;
  double memory_bytes, bf16_peak, fp32_peak;
  strata::Link intra, inter;
};
const DeviceKind kDevices[] = {
    {"h100",
     80e9,
     989e12,
     494e12,
     {strata::PathClass::nvb, 450, 2},
     {strata::PathClass::net, 50, 5}},
    {"a100",
     80e9,
     312e12,
     156e12,
     {strata::PathClass::nvb, 300, 2},
     {strata::PathClass::net, 25, 5}},
};
// Sustained over peak on GPUs: a large transformer's model FLOPs utilisation (40-55 % in the
// Megatron-LM and PaLM reports); --flops or a calibration replaces it.
constexpr double kGpuEfficiency = 0.5;
// Host memory between processes of one node, and plain Ethernet between nodes: the topology
// layer's estimates (docs/topology.md, "Estimates").
const strata::Link kHostLink{strata::PathClass::phb, 10, 0.5};
const strata::Link kEthernet{strata::PathClass::net, 1.25, 30};

const DeviceKind& device_kind(const std::string& name) {
  for (const DeviceKind& d : kDevices) {
    if (name == d.name) return d;
  }
  throw std::invalid_argument("unknown device '" + name + "' (known: h100, a100, cpu)");
}

ClusterSpec gpu_cluster(const DeviceKind& d, int nodes, int per_node, Precision p) {
  ClusterSpec c;
  c.device = d.name;
  c.nodes = nodes, c.per_node = per_node;
  c.memory_bytes = d.memory_bytes;
  const double peak = p == Precision::fp32 ? d.fp32_peak : d.bf16_peak;
  c.flops = peak * kGpuEfficiency;
  c.flops_source = std::string(d.name) + " " + (p == Precision::fp32 ? "tf32" : "bf16") +
                   " peak x " + std::to_string(kGpuEfficiency).substr(0, 3);
  c.intra = d.intra, c.inter = d.inter;
  c.host = false;
  c.description = std::to_string(nodes) + " x " + std::to_string(per_node) + " " + d.name;
  return c;
}

// FLOP/s of the trainer's matrix product on N rows of a transformer block's width (512 to
// 2048), on the BLAS threads the caller set.
double measured_flops(int N) {
  const int C = 512, OC = 2048, reps = 2048 / N;
  std::vector<float> in(size_t(N) * C, 0.5f), w(size_t(OC) * C, 0.25f), out(size_t(N) * OC);
  double best = 1e30;
  for (int i = 0; i < 20; ++i) {  // the best of many: the machine may be shared
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) {
      gpt::layers::matmul_forward(out.data(), in.data(), w.data(), nullptr, N, C, OC);
    }
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps);
  }
  return 2.0 * N * C * OC / best;
}

ClusterSpec host_cluster(int nodes) {
  const strata::NodeTopology node = strata::detect_node();
  ClusterSpec c;
  c.device = "cpu";
  c.nodes = nodes;
  c.per_node = std::max(1, node.cores > 0 ? node.cores : int(::sysconf(_SC_NPROCESSORS_ONLN)));
  double memory = 0;
  for (const auto& n : node.numa) memory += double(n.memory_bytes);
  if (memory == 0) memory = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGESIZE));
  c.memory_bytes = memory / c.per_node;
  // The rate as rows / (rows + h) of its limit: from 32 and 512 rows, q = r32 / r512 =
  // 32 (512 + h) / (512 (32 + h)), so h = 16384 (1 - q) / (512 q - 32).
  gpt::default_blas_threads();  // a rank's threads (1), not OpenBLAS's default of every core
  const double r512 = measured_flops(512), q = std::clamp(measured_flops(32) / r512, 0.1, 1.0);
  c.rows_half = 16384 * (1 - q) / (512 * q - 32);
  c.flops = r512 * (512 + c.rows_half) / 512;
  c.flops_source = "measured: one core's fp32 matrix product, 32 and 512 rows x 512 x 2048";
  c.intra = kHostLink, c.inter = kEthernet;
  c.host = true;
  return c;
}

}  // namespace

Precision precision_from_name(const std::string& name) {
  if (name == "fp32") return Precision::fp32;
  if (name == "bf16-mixed") return Precision::bf16_mixed;
  throw std::invalid_argument("unknown precision '" + name + "' (known: fp32, bf16-mixed)");
}

const char* precision_name(Precision p) { return p == Precision::fp32 ? "fp32" : "bf16-mixed"; }

ModelSpec model_preset(const std::string& name) {
  ModelSpec m{name, {}};
  gpt::Config& c = m.config;
  if (name == "small" || name == "tiny") {
    c = gpt::Config::named(name);
  } else if (name == "gpt2") {
    c.vocab = 50257, c.ctx = 1024, c.layers = 12, c.heads = 12, c.embd = 768;
  } else if (name == "7b") {
    c.vocab = 50257, c.ctx = 2048, c.layers = 32, c.heads = 32, c.embd = 4096;
  } else if (name == "70b") {
    c.vocab = 32000, c.ctx = 4096, c.layers = 80, c.heads = 64, c.embd = 8192;
  } else if (name == "175b") {
    c.vocab = 50257, c.ctx = 2048, c.layers = 96, c.heads = 96, c.embd = 12288;
  } else if (name == "moe") {
    c.vocab = 32000, c.ctx = 4096, c.layers = 32, c.heads = 32, c.embd = 4096;
    c.experts = 8, c.top_k = 2, c.moe_every = 1;
  } else {
    throw std::invalid_argument("unknown model '" + name +
                                "' (known: tiny, small, gpt2, 7b, 70b, 175b, moe)");
  }
  return m;
}

ClusterSpec cluster_of(const std::string& nxg, const std::string& device, Precision p) {
  const size_t x = nxg.find('x');
  int nodes = 0, per_node = 0;
  try {
    size_t used = 0;
    if (x == std::string::npos) throw std::invalid_argument("no x");
    nodes = std::stoi(nxg.substr(0, x), &used);
    if (used != x) throw std::invalid_argument("junk");
    per_node = std::stoi(nxg.substr(x + 1), &used);
    if (used != nxg.size() - x - 1) throw std::invalid_argument("junk");
  } catch (const std::exception&) {
    nodes = 0;
  }
  if (nodes < 1 || per_node < 1) {
    throw std::invalid_argument("--cluster '" + nxg +
                                "': expected NxG (N nodes of G devices, e.g. 128x8), 'live' or "
                                "a topology file");
  }
  if (device == "cpu") {
    ClusterSpec c = host_cluster(nodes);
    // More ranks than this machine's cores share them (emulated nodes run on one machine).
    if (per_node > c.per_node) c.cores = c.per_node;
    c.per_node = per_node;
    c.description = std::to_string(nodes) + " x " + std::to_string(per_node) + " cpu";
    return c;
  }
  return gpu_cluster(device_kind(device), nodes, per_node, p);
}

void use_trainer_blas_kernels(char** argv) { gpt::use_best_blas_kernel(argv); }

ClusterSpec live_cluster(int nodes) {
  ClusterSpec c = host_cluster(nodes);
  c.description = "this machine (live), " + std::to_string(c.per_node) + " cores" +
                  (nodes > 1 ? " x " + std::to_string(nodes) + " nodes" : "");
  return c;
}

ClusterSpec cluster_from_file(const std::string& path, int nodes, const std::string& device,
                              Precision p) {
  const strata::NodeTopology node = strata::load_node(path);  // throws naming the file
  const std::vector<size_t> gpus = node.of_kind(strata::DeviceKind::gpu);
  if (gpus.empty()) {
    ClusterSpec c = host_cluster(nodes);
    c.per_node = std::max(1, node.cores);
    c.description = path + " (" + std::to_string(c.per_node) + " cores) x " + std::to_string(nodes);
    return c;
  }
  // The GPU's own kind where the file names one this table knows, else `device`'s figures.
  const std::string model = node.devices[gpus[0]].model;
  std::string kind = device == "cpu" ? "h100" : device;
  bool known = false;
  for (const DeviceKind& d : kDevices) {
    std::string upper = d.name;
    for (char& ch : upper) ch = char(std::toupper(ch));
    if (model.find(upper) != std::string::npos) kind = d.name, known = true;
  }
  ClusterSpec c = gpu_cluster(device_kind(kind), nodes, int(gpus.size()), p);
  if (gpus.size() > 1) c.intra = node.link(gpus[0], gpus[1]);
  const int nic = node.devices[gpus[0]].nearest_nic;
  if (nic >= 0 && node.devices[size_t(nic)].rate_gbps > 0) {
    c.inter.bandwidth_gbs = node.devices[size_t(nic)].rate_gbps / 8;
  }
  c.description =
      path + " (" + std::to_string(gpus.size()) + " " + (model.empty() ? "GPUs" : model) + ") x " +
      std::to_string(nodes) +
      (known ? "" : ", with " + kind + " memory and compute (--device, --gpu-memory, --flops)");
  return c;
}

}  // namespace plan
