// The staged way of the device path: a call on CUDA memory copied to pinned host memory on its
// stream, run by the host algorithms, and copied back. Element-wise collectives (all-reduce,
// broadcast, reduce) go in chunks of STRATA_STAGE_CHUNK bytes, so that while the host reduces
// chunk k the GPU copies chunk k+1 in and chunk k-1 out. Ranks sharing one GPU (NCCL refuses
// them) take this way, and so does every multi-rank device test on a one-GPU machine.
#include <algorithm>

#include "base/config.hpp"
#include "runtime/calls.hpp"
#include "runtime/communicator_impl.hpp"
#include "runtime/device_path.hpp"

namespace strata::runtime {
namespace {

using algo::Collective;

// The bytes a call reads from `in` and writes to `out` on this rank (0 where it ignores one).
std::pair<size_t, size_t> extents(Collective c, const algo::Args& a, int rank, int size) {
  const size_t b = a.bytes(), n = size_t(size);
  const bool root = rank == a.root;
  switch (c) {
    case Collective::all_reduce:
      return {b, b};
    case Collective::reduce_scatter:
      return {b * n, b};
    case Collective::all_gather:
      return {b, b * n};
    case Collective::all_to_all:
      return {b * n, b * n};
    case Collective::all_to_allv: {
      size_t in = 0, out = 0;
      for (size_t p = 0; p < n; ++p) {
        in = std::max(in, a.send_displs[p] + a.send_counts[p]);
        out = std::max(out, a.recv_displs[p] + a.recv_counts[p]);
      }
      return {in * dtype_size(a.dtype), out * dtype_size(a.dtype)};
    }
    case Collective::broadcast:
      return {root ? b : 0, b};
    case Collective::reduce:
      return {b, root ? b : 0};
    case Collective::gather:
      return {b, root ? b * n : 0};
    case Collective::scatter:
      return {root ? b * n : 0, b};
    case Collective::barrier:
      break;
  }
  return {0, 0};
}

bool elementwise(Collective c) {
  return c == Collective::all_reduce || c == Collective::broadcast || c == Collective::reduce;
}

}  // namespace

Work staged_call(Group& g, DeviceGroup& d, Collective c, const algo::Args& a, device::Stream s) {
  const ErrorContext where = g.context(algo::collective_name(c).data());
  const Clock::time_point deadline = Clock::now() + g.timeout();
  auto [in_bytes, out_bytes] = extents(c, a, g.rank, g.size);
  if (!a.in) in_bytes = 0;
  if (!a.out) out_bytes = 0;
  // Pinned memory laid out as the device buffers overlap (the in-place layouts), so the host
  // algorithm sees the same in-place call.
  auto* in = static_cast<const uint8_t*>(a.in);
  auto* out = static_cast<uint8_t*>(a.out);
  uint8_t *pin_in = nullptr, *pin_out = nullptr;
  if (elementwise(c)) {
    // In place on the host whatever the device layout: the output's elements are the input's,
    // one staging buffer is touched instead of two, and the host's in-place all-reduce is the
    // faster (benchmarks/RESULTS.md, "The device path").
    pin_in = pin_out =
        static_cast<uint8_t*>(d.in.get(std::max<size_t>({in_bytes, out_bytes, 1}), where));
  } else if (out_bytes && in_bytes && out >= in && out + out_bytes <= in + in_bytes) {
    pin_in = static_cast<uint8_t*>(d.in.get(in_bytes, where));
    pin_out = pin_in + (out - in);
  } else if (out_bytes && in_bytes && in >= out && in + in_bytes <= out + out_bytes) {
    pin_out = static_cast<uint8_t*>(d.out.get(out_bytes, where));
    pin_in = pin_out + (in - out);
  } else {
    pin_in = static_cast<uint8_t*>(d.in.get(std::max<size_t>(in_bytes, 1), where));
    pin_out = static_cast<uint8_t*>(d.out.get(std::max<size_t>(out_bytes, 1), where));
  }
  // Chunks: element-wise calls by STRATA_STAGE_CHUNK, the others whole.
  const size_t es = dtype_size(a.dtype);
  const size_t per = elementwise(c) ? std::max<size_t>(1, config().stage_chunk_bytes / es) : 0;
  const size_t chunks = per && a.count > per ? (a.count + per - 1) / per : 1;
  while (d.events.size() < chunks + 1) d.events.push_back(std::make_unique<device::Event>(where));
  auto span = [&](size_t k, size_t bytes) -> std::pair<size_t, size_t> {  // offset, length
    if (chunks == 1) return {0, bytes};
    const size_t first = k * per * es;
    return {std::min(first, bytes), std::min(per * es, bytes - std::min(first, bytes))};
  };
  for (size_t k = 0; k < chunks; ++k) {
    auto [off, len] = span(k, in_bytes);
    device::copy_async(pin_in + off, in + off, len, s, where);
    d.events[k]->record(s, where);
  }
  std::vector<Work> legs;
  for (size_t k = 0; k < chunks; ++k) {
    wait_event(*d.events[k], deadline, where);
    algo::Args host = a;
    host.in = a.in ? pin_in : nullptr;
    host.out = a.out ? pin_out : nullptr;
    if (chunks > 1) {
      const size_t first = k * per;
      host.count = std::min(per, a.count - first);
      host.in = pin_in + first * es;
      host.out = pin_out + first * es;
    }
    legs.push_back(call(g, c, host));
  }
  for (size_t k = 0; k < chunks; ++k) {
    legs[k].wait();
    auto [off, len] = span(k, out_bytes);
    device::copy_async(out + off, pin_out + off, len, s, where);
  }
  d.events[chunks]->record(s, where);
  wait_event(*d.events[chunks], deadline, where);
  return completed_work();
}

}  // namespace strata::runtime
