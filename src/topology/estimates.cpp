#include "topology/estimates.hpp"

namespace strata::topo {

double pcie_gbs(double gts, int width) {
  if (gts <= 0 || width <= 0) return 0;
  // Gen1/2 (2.5 and 5 GT/s) encode 8b/10b, gen3 and later 128b/130b.
  double efficiency = gts <= 5.0 ? 0.8 : 128.0 / 130.0;
  return gts * width * efficiency / 8.0;
}

double inter_socket_gbs(const CpuInfo& cpu) {
  // NCCL's figures (src/graph/topo.h) for GPU traffic across sockets.
  if (cpu.arch.starts_with("ppc")) return 32;  // POWER9 X-Bus (P9_BW)
  if (cpu.arch.starts_with("aarch64") || cpu.arch.starts_with("arm")) return 6;  // ARM_BW
  if (cpu.vendor == "GenuineIntel") {
    if (cpu.model == 143) return 22;                                          // Sapphire Rapids
    if (cpu.model == 207 || cpu.model == 173 || cpu.model == 174) return 40;  // Emerald/Granite
    if (cpu.model >= 0 && cpu.model < 85) return 6;  // Broadwell and older QPI (BDW_QPI_BW)
    return 10;                                       // Skylake..Ice Lake UPI (SKL_QPI_BW)
  }
  if (cpu.vendor == "AuthenticAMD") {
    // Families as the OS reports them (0x17, 0x19, 0x1a) or as NCCL's XML encodes them
    // (extended family << 4 | base family: 0x8f, 0xaf, 0xbf).
    if (cpu.family == 0x19 || cpu.family == 0xaf) return 24;  // Zen 3/4
    if (cpu.family == 0x1a || cpu.family == 0xbf) return 32;  // Zen 5
    return 16;                                                // Zen 1/2 (AMD_BW)
  }
  return 10;
}

double nvlink_per_link_gbs(int major, int minor) {
  // Per link and direction, from NVIDIA's data sheets: NVLink 1 (P100) 20 GB/s, NVLink 2 (V100),
  // 3 (A100) and 4 (H100) 25 GB/s, NVLink 5 (B200) 50 GB/s; the A40-class bridge ~14 GB/s.
  if (major == 6) return 20;
  if (major == 8 && minor >= 6) return 14;
  if (major >= 10) return 50;
  return 25;
}

double class_latency_us(PathClass c) {
  switch (c) {
    case PathClass::loc:
      return 0.1;
    case PathClass::nvl:
      return 0.6;
    case PathClass::nvb:
      return 0.8;
    case PathClass::pix:
      return 1.0;
    case PathClass::pxb:
      return 1.2;
    case PathClass::phb:
      return 1.5;
    case PathClass::sys:
      return 2.0;
    case PathClass::net:
      return 5.0;
  }
  return 2.0;
}

double default_nic_rate_gbps(NicKind k) {
  // RDMA NICs: 100 Gb/s, the rate NCCL assumes (NET_BW 12 GB/s); Ethernet: 10 Gb/s.
  return is_rdma(k) ? 100 : 10;
}

Link nic_link(const NodeTopology& node, std::string_view nic) {
  const int i = node.find(nic);
  const NicKind kind = i >= 0 ? node.devices[size_t(i)].nic_kind : NicKind::unknown;
  double rate = i >= 0 ? node.devices[size_t(i)].rate_gbps : 0;
  if (rate <= 0) rate = default_nic_rate_gbps(kind);
  return {PathClass::net, rate / 8, nic_latency_us(kind)};
}

double nic_latency_us(NicKind k) {
  switch (k) {
    case NicKind::infiniband:
      return 2;
    case NicKind::omnipath:
      return 2;
    case NicKind::roce:
      return 3;
    case NicKind::efa:
      return 15;
    case NicKind::ethernet:
    case NicKind::unknown:
      return 30;
  }
  return 30;
}

bool is_rdma(NicKind k) {
  return k == NicKind::infiniband || k == NicKind::roce || k == NicKind::omnipath ||
         k == NicKind::efa;
}

Link self_link(const Device& d) {
  double bw = kGpuLocalGbs;
  if (d.kind == DeviceKind::cpu) bw = kHostCopyGbs;
  if (d.kind == DeviceKind::nic)
    bw = (d.rate_gbps > 0 ? d.rate_gbps : default_nic_rate_gbps(d.nic_kind)) / 8;
  return {PathClass::loc, bw, class_latency_us(PathClass::loc)};
}

Link default_link(PathClass c) {
  double bw = 0;
  switch (c) {
    case PathClass::loc:
      bw = kGpuLocalGbs;
      break;
    case PathClass::nvl:
      bw = 4 * 25;
      break;  // four NVLink 2-4 links
    case PathClass::nvb:
      bw = 6 * 25;
      break;  // a V100 on a DGX-2's switches
    case PathClass::pix:
    case PathClass::pxb:
    case PathClass::phb:
      bw = kPcieGen3x16Gbs;
      break;
    case PathClass::sys:
      bw = 10;
      break;  // Skylake UPI
    case PathClass::net:
      bw = 100 / 8.0;
      break;
  }
  return Link{c, bw,
              c == PathClass::net ? nic_latency_us(NicKind::infiniband) : class_latency_us(c)};
}

}  // namespace strata::topo
