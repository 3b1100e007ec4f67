// The public Communicator's point-to-point calls: send, recv and send_recv, checked alike.
#include "runtime/device_path.hpp"
#include "runtime/entry_checks.hpp"
#include "strata/communicator.hpp"

namespace strata {

using runtime::checked;
using runtime::place;

namespace {

// A send's or receive's checks, shared by send, recv and send_recv; returns the op's checker.
runtime::Checker check_peer_op(Communicator::Impl& c, const PeerOp& op) {
  const bool sends = op.kind == PeerOp::send;
  runtime::Checker check = c.checker(sends ? "send" : "recv", op.peer, true);
  if (sends || op.peer != kAnySource) check.peer(op.peer, c.size, "peer");
  check.buffer(op.buffer, sends ? "input" : "output");
  return check;
}

// One send or receive, checked; a CUDA buffer's goes on the device path, on `stream` where
// has_stream.
Work one_op(Communicator::Impl& c, const PeerOp& op, bool has_stream, void* stream) {
  const runtime::Checker check = check_peer_op(c, op);
  const bool sends = op.kind == PeerOp::send;
  if (op.buffer.memory == MemoryKind::cuda) {
    return runtime::device_point_to_point(c, sends, op.buffer, op.peer, op.tag,
                                          place(check, has_stream, stream, op.buffer));
  }
  return c.point_to_point(sends, op.buffer, op.peer, op.tag);
}

}  // namespace

Work Communicator::send(Buffer in, int peer, uint32_t tag) {
  return one_op(checked(impl_), {PeerOp::send, in, peer, tag}, has_stream_, stream_);
}

Work Communicator::recv(Buffer out, int peer, uint32_t tag) {
  return one_op(checked(impl_), {PeerOp::recv, out, peer, tag}, has_stream_, stream_);
}

std::vector<Work> Communicator::send_recv(const std::vector<PeerOp>& ops) {
  auto& c = checked(impl_);
  std::vector<PeerOp> device;  // CUDA buffers: issued together (runtime/device_path.hpp)
  runtime::Placement at{};
  for (const PeerOp& op : ops) {  // every op checked before any moves
    const runtime::Checker check = check_peer_op(c, op);
    if (op.buffer.memory != MemoryKind::cuda) continue;
    if (device.empty()) at = place(check, has_stream_, stream_, op.buffer);
    device.push_back(op);
  }
  std::vector<Work> device_works =
      device.empty() ? std::vector<Work>{} : runtime::device_send_recv(c, device, at);
  std::vector<Work> works;
  size_t next_device = 0;
  for (const PeerOp& op : ops) {
    works.push_back(op.buffer.memory == MemoryKind::cuda
                        ? device_works[next_device++]
                        : c.point_to_point(op.kind == PeerOp::send, op.buffer, op.peer, op.tag));
  }
  return works;
}

}  // namespace strata
