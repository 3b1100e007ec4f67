// The device path's setup, its NCCL way, and device sends and receives (docs/device.md).
#include "runtime/device_path.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <tuple>

#include "base/config.hpp"
#include "base/log.hpp"
#include "runtime/calls.hpp"
#include "runtime/communicator_impl.hpp"
#include "runtime/work_state.hpp"

namespace strata::runtime {
namespace {

constexpr size_t kUuidBytes = 64;  // a UUID's hex digits, padded: one all-gather block

// The group's device state, made at its first device collective, on every rank alike.
DeviceGroup& setup(Group& g, int dev, const ErrorContext& where) {
  if (g.device) return *g.device;
  auto d = std::make_shared<DeviceGroup>();
  d->device = dev;
  device::use_device(dev, where);
  d->own = std::make_unique<device::OwnStream>(where);
  // Each rank's block: its GPU's UUID (32 hex digits), then how many GPUs it sees.
  std::string id = device::device_uuid(dev, where);
  id.resize(kUuidBytes / 2);
  id += std::to_string(device::device_count(where));
  id.resize(kUuidBytes);
  std::string all(kUuidBytes * size_t(g.size), '\0');
  call(g, algo::Collective::all_gather,
       {.in = id.data(), .out = all.data(), .count = kUuidBytes, .dtype = DataType::u8})
      .wait();
  std::vector<std::string> uuids;
  std::vector<int> visible;
  for (int r = 0; r < g.size; ++r) {
    const char* block = all.data() + size_t(r) * kUuidBytes;
    uuids.emplace_back(block, 32);
    visible.push_back(std::atoi(block + kUuidBytes / 2));
  }
  d->path = device::choose_path(uuids, device::built(), config().device_path, where);
  if (g.rank == 0) {
    if (std::string advice = device::shared_gpu_advice(uuids, visible); !advice.empty()) {
      STRATA_LOG(WARN, "DEVICE") << where.group << ": " << advice;
    }
  }
  if (d->path == device::Path::nccl) {
    device::NcclId nid{};
    if (g.rank == 0) nid = device::nccl_unique_id(where);
    call(g, algo::Collective::broadcast,
         {.in = nid.data(),
          .out = nid.data(),
          .count = nid.size(),
          .dtype = DataType::u8,
          .root = 0})
        .wait();
    d->nccl =
        std::make_unique<device::Nccl>(nid, g.rank, g.size, Clock::now() + g.timeout(), where);
  }
  g.device = d;
  return *d;
}

// The NCCL calls of collective `c` (sends and receives grouped where NCCL has no collective;
// a rank's block for itself copied on the stream, not sent to itself).
void enqueue(device::Nccl& n, algo::Collective c, const algo::Args& a, int rank, int size,
             device::Stream s, const ErrorContext& where) {
  using algo::Collective;
  const size_t es = dtype_size(a.dtype);
  auto in_at = [&](size_t elems) { return static_cast<const uint8_t*>(a.in) + elems * es; };
  auto out_at = [&](size_t elems) { return static_cast<uint8_t*>(a.out) + elems * es; };
  // One rank's average is its input, as its sum is. NCCL 2.28.3's one-rank average out of place
  // left the elements past the last 512 KiB boundary unwritten (H200: f32 x 3145733, f64 x
  // 65537; docs/device.md), so one rank asks for the sum.
  const ReduceOp op = a.op == ReduceOp::avg && size == 1 ? ReduceOp::sum : a.op;
  auto exchange = [&](auto&& blocks) {  // blocks(peer) -> {send from, count, recv at, count}
    if (auto [from, sc, to, rc] = blocks(rank); from && to) {
      device::copy_async(to, from, sc * es, s, where);
    }
    if (size == 1) return;
    n.group_start();
    for (int p = 0; p < size; ++p) {
      if (p == rank) continue;
      auto [from, sc, to, rc] = blocks(p);
      if (from) n.send(from, sc, a.dtype, p, s);
      if (to) n.recv(to, rc, a.dtype, p, s);
    }
    n.group_end();
  };
  using Block = std::tuple<const uint8_t*, size_t, uint8_t*, size_t>;
  const bool root = rank == a.root;
  switch (c) {
    case Collective::all_reduce:
      return n.all_reduce(a.in, a.out, a.count, a.dtype, op, s);
    case Collective::reduce_scatter:
      return n.reduce_scatter(a.in, a.out, a.count, a.dtype, op, s);
    case Collective::all_gather:
      return n.all_gather(a.in, a.out, a.count, a.dtype, s);
    case Collective::broadcast:
      return n.broadcast(a.in, a.out, a.count, a.dtype, a.root, s);
    case Collective::reduce:
      return n.reduce(a.in, a.out, a.count, a.dtype, op, a.root, s);
    case Collective::all_to_all:
    case Collective::all_to_allv:
      return exchange([&](int p) {
        const bool v = c == Collective::all_to_allv;
        const size_t sc = v ? a.send_counts[p] : a.count, sd = v ? a.send_displs[p] : a.count * p;
        const size_t rc = v ? a.recv_counts[p] : a.count, rd = v ? a.recv_displs[p] : a.count * p;
        return Block{in_at(sd), sc, out_at(rd), rc};
      });
    case Collective::gather:  // every rank sends its input to the root, which receives them all
      return exchange([&](int p) {
        return Block{p == a.root ? in_at(0) : nullptr, a.count,
                     root ? out_at(a.count * p) : nullptr, a.count};
      });
    case Collective::scatter:  // the root sends block p to rank p
      return exchange([&](int p) {
        return Block{root ? in_at(a.count * p) : nullptr, a.count,
                     p == a.root ? out_at(0) : nullptr, a.count};
      });
    case Collective::barrier:
      break;
  }
  throw Error(ErrorCode::internal, where, "a barrier reached the device path");
}

// Between two polls of an event: a short spin (each query takes the driver's locks, which the
// issuing thread needs too), then sleeps once the wait is long.
void pause(int polls) {
  if (polls > 1000) return std::this_thread::sleep_for(std::chrono::microseconds(20));
  for (int i = 0; i < 64; ++i) _mm_pause();
}

// The Work of the NCCL calls just enqueued on `s`: the op queue watches it (OpQueue::watch), it
// completes once the GPU passes an event recorded after them, and NCCL's asynchronous error,
// the deadline, a peer's death or an abort fail it and abort the NCCL communicator, whose
// kernels would wait for ever on a peer that never comes. Not queued: the stream orders NCCL's
// calls, and the op queue's hand-off cost more than the call (H200: 2 us of 4-5 a call).
// `source`: a send's or receive's peer, -1 for a collective. Sends and receives, which may come
// from any thread, take no ticket (tickets follow the collectives' one issuing thread).
Work nccl_work(Group& g, const ErrorContext& where, Buffer data, device::Stream s,
               int source = -1) {
  const Clock::time_point deadline = Clock::now() + g.timeout();
  std::shared_ptr<DeviceGroup> dg = g.device;
  std::shared_ptr<device::Event> done = dg->event(where);
  done->record(s, where);
  return g.watch(
      where, data,
      [dg, done = std::move(done), s, ticket = source < 0 ? dg->take_ticket() : 0, where, deadline,
       source](detail::WorkState& st) {
        if ((ticket && dg->passed(s, ticket)) || done->done(where)) {
          if (ticket) dg->mark_passed(s, ticket);
          st.source = source;
          return st.complete(nullptr, Clock::now());
        }
        if (const std::string err = dg->nccl->async_error(); !err.empty()) {
          throw Error(ErrorCode::transport, where, err);
        }
        if (Clock::now() > deadline) {
          throw Error(ErrorCode::timeout, where,
                      "timed out waiting for NCCL's operation on the GPU (a peer that never "
                      "called it, or a kernel that hangs); the NCCL communicator was aborted");
        }
      },
      [dg] { dg->nccl->abort(); });
}

// What NCCL's send and receive cannot take, refused before anything is enqueued.
void check_nccl_peer_op(const Buffer& b, int peer, uint32_t tag, const ErrorContext& where) {
  if (tag != 0 || peer == kAnySource) {
    throw Error(ErrorCode::invalid_argument, where,
                "NCCL's sends and receives have no tags and no any-source receive: tag 0 and a "
                "named peer only on the device path");
  }
  if (const std::string refused = device::nccl_refuses(b.dtype); !refused.empty()) {
    throw Error(ErrorCode::invalid_argument, where, refused);
  }
}

}  // namespace

std::shared_ptr<DeviceGroup> split_device(Group& parent, int color, int key,
                                          const ErrorContext& where) {
  const std::shared_ptr<DeviceGroup> from = parent.device;
  if (!from || from->path != device::Path::nccl) return nullptr;
  device::use_device(from->device, where);
  auto nccl = from->nccl->split(color, key, Clock::now() + parent.timeout(), where);
  if (!nccl) return nullptr;
  auto d = std::make_shared<DeviceGroup>();
  d->device = from->device;
  d->path = device::Path::nccl;
  d->own = std::make_unique<device::OwnStream>(where);
  d->nccl = std::move(nccl);
  return d;
}

int call_device(Group& g, const char* op, const void* a, const void* b) {
  const ErrorContext where = g.context(op);
  int dev = -1;
  // In place, the one buffer is asked once.
  for (auto [p, what] : {std::pair{a, "input"}, std::pair{b == a ? nullptr : b, "output"}}) {
    if (!p) continue;
    const int d = device::device_of(p, where, what);
    if (d < 0) {
      throw Error(ErrorCode::invalid_argument, where,
                  std::string(what) + " is marked CUDA device memory but is host memory");
    }
    if (dev >= 0 && d != dev) {
      throw Error(ErrorCode::invalid_argument, where,
                  "input is on CUDA device " + std::to_string(dev) + " and output on device " +
                      std::to_string(d) + ": one call uses one device");
    }
    dev = d;
  }
  if (g.device && dev >= 0 && dev != g.device->device) {
    throw Error(ErrorCode::invalid_argument, where,
                "buffers on CUDA device " + std::to_string(dev) + ", but this communicator's " +
                    "device calls run on device " + std::to_string(g.device->device));
  }
  return dev >= 0 ? dev : g.device ? g.device->device : 0;
}

Work device_call(Group& g, algo::Collective c, const algo::Args& a, const Placement& at) {
  const algo::Shape& shape = algo::shape(c);
  const ErrorContext where = g.context(shape.name.data());
  const int dev = call_device(g, shape.name.data(), a.in, a.out);
  DeviceGroup& d = setup(g, dev, where);
  device::use_device(d.device, where);
  const device::Stream s = d.stream(at);
  if (d.path == device::Path::staged) return staged_call(g, d, c, a, s);
  const std::string refused =
      device::nccl_refuses(a.dtype, shape.reduces ? std::optional(a.op) : std::nullopt);
  if (!refused.empty()) throw Error(ErrorCode::invalid_argument, where, refused);
  const int root = shape.rooted ? a.root : -1;
  const Buffer data{const_cast<void*>(a.in), a.count, a.dtype};
  ErrorContext call;  // its sequence number taken
  if (config().check) {
    // STRATA_CHECK's exchange of the call's fingerprint, on the op queue, before NCCL sees the
    // call: a mismatch fails here, with nothing enqueued.
    const size_t bytes = shape.chooses_by_all_blocks ? a.bytes() * size_t(g.size) : a.bytes();
    g.collective(
         shape.name.data(), root, data, shape.reduces ? int(a.op) : -1, bytes, [](algo::Exec&) {},
         &call)
        .wait();
  } else {
    call = g.next_call(shape.name.data(), root);
  }
  enqueue(*d.nccl, c, a, g.rank, g.size, s, call);
  return nccl_work(g, call, data, s);
}

Work device_point_to_point(Group& g, bool is_send, Buffer b, int peer, uint32_t tag,
                           const Placement& at) {
  const char* op = is_send ? "send" : "recv";
  const ErrorContext where = g.context(op, peer);
  const int dev = call_device(g, op, is_send ? b.data : nullptr, is_send ? nullptr : b.data);
  device::use_device(dev, where);
  const Clock::time_point deadline = Clock::now() + g.timeout();
  if (!g.device || g.device->path == device::Path::staged) {
    // Staged through pinned memory of its own (a send and a receive may be outstanding
    // together). A send's copy is on the stream before it returns; a receive writes its output
    // on the stream when its Work is waited on (or tested) after the message came.
    auto own = std::make_shared<device::OwnStream>(where);
    const device::Stream s = at.has_stream ? at.stream : own->get();
    auto pinned = std::make_shared<device::Pinned>();
    void* host = pinned->get(std::max<size_t>(b.bytes(), 1), where);
    auto copied = std::make_shared<device::Event>(where);
    if (is_send) {
      device::copy_async(host, b.data, b.bytes(), s, where);
      copied->record(s, where);
      wait_event(*copied, deadline, where);
      Work sent = g.point_to_point(true, Buffer{host, b.count, b.dtype}, peer, tag);
      return g.watch(where, b, [sent, pinned](detail::WorkState& st) {
        if (sent.test()) st.complete(nullptr, Clock::now());
      });
    }
    Work got = g.point_to_point(false, Buffer{host, b.count, b.dtype}, peer, tag);
    return g.watch(where, b,
                   [got, pinned, host, own, copied, b, s, where, dev,
                    copying = false](detail::WorkState& st) mutable {
                     if (!copying) {
                       if (!got.test()) return;
                       device::use_device(dev, where);  // the poller may be the queue's thread
                       device::copy_async(b.data, host, b.bytes(), s, where);
                       copied->record(s, where);
                       st.source = got.source();
                       copying = true;
                     }
                     if (copied->done(where)) st.complete(nullptr, Clock::now());
                   });
  }
  check_nccl_peer_op(b, peer, tag, where);
  const device::Stream s = g.device->stream(at);
  device::Nccl& nccl = *g.device->nccl;
  if (is_send) {
    nccl.send(b.data, b.count, b.dtype, peer, s);
  } else {
    nccl.recv(b.data, b.count, b.dtype, peer, s);
  }
  return nccl_work(g, where, b, s, peer);
}

std::vector<Work> device_send_recv(Group& g, const std::vector<PeerOp>& ops, const Placement& at) {
  if (!g.device || g.device->path == device::Path::staged) {
    std::vector<Work> works;  // staged: each on its own, as they progress together anyway
    for (const PeerOp& op : ops) {
      works.push_back(
          device_point_to_point(g, op.kind == PeerOp::send, op.buffer, op.peer, op.tag, at));
    }
    return works;
  }
  // NCCL: every op checked, then all of them inside one group.
  for (const PeerOp& op : ops) {
    const char* name = op.kind == PeerOp::send ? "send" : "recv";
    const ErrorContext where = g.context(name, op.peer);
    device::use_device(call_device(g, name, op.buffer.data, nullptr), where);
    check_nccl_peer_op(op.buffer, op.peer, op.tag, where);
  }
  const device::Stream s = g.device->stream(at);
  device::Nccl& nccl = *g.device->nccl;
  nccl.group_start();
  for (const PeerOp& op : ops) {
    const Buffer& b = op.buffer;
    if (op.kind == PeerOp::send) {
      nccl.send(b.data, b.count, b.dtype, op.peer, s);
    } else {
      nccl.recv(b.data, b.count, b.dtype, op.peer, s);
    }
  }
  nccl.group_end();
  std::vector<Work> works;
  for (const PeerOp& op : ops) {
    works.push_back(nccl_work(g, g.context(op.kind == PeerOp::send ? "send" : "recv", op.peer),
                              op.buffer, s, op.peer));
  }
  return works;
}

void wait_event(const device::Event& e, Clock::time_point deadline, const ErrorContext& where) {
  for (int polls = 0; !e.done(where); ++polls) {
    if (Clock::now() > deadline) {
      throw Error(ErrorCode::timeout, where,
                  "timed out waiting for the GPU to reach this call's copies on its stream");
    }
    pause(polls);
  }
}

bool DeviceGroup::passed(device::Stream s, uint64_t ticket) {
  std::lock_guard<std::mutex> l(passed_mu_);
  for (const auto& [stream, latest] : passed_) {
    if (stream == s) return ticket <= latest;
  }
  return false;
}

void DeviceGroup::mark_passed(device::Stream s, uint64_t ticket) {
  std::lock_guard<std::mutex> l(passed_mu_);
  for (auto& [stream, latest] : passed_) {
    if (stream == s) return void(latest = std::max(latest, ticket));
  }
  passed_.emplace_back(s, ticket);
}

std::shared_ptr<device::Event> DeviceGroup::event(const ErrorContext& where) {
  std::unique_ptr<device::Event> e;
  {
    std::lock_guard<std::mutex> l(spare_mu_);
    if (!spare_.empty()) {
      e = std::move(spare_.back());
      spare_.pop_back();
    }
  }
  if (!e) e = std::make_unique<device::Event>(where);
  return std::shared_ptr<device::Event>(e.release(), [pool = weak_from_this()](device::Event* p) {
    std::unique_ptr<device::Event> owned(p);
    if (auto d = pool.lock()) {
      std::lock_guard<std::mutex> l(d->spare_mu_);
      d->spare_.push_back(std::move(owned));
    }
  });
}

Work completed_work() {
  auto st = std::make_shared<detail::WorkState>();
  st->complete(nullptr, Clock::now());
  return Work(st);
}

}  // namespace strata::runtime
