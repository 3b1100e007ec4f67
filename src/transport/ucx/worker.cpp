#include "transport/ucx/worker.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <mutex>
#include <utility>

#include "base/config.hpp"
#include "bootstrap/await_rank.hpp"
#include "transport/calls/call_bits.hpp"
#include "transport/tags.hpp"

namespace strata::ucx {

namespace tags = transport::tags;
namespace {

constexpr uint64_t kFullMask = ~uint64_t(0);
const std::string kNeverTaken = " (a message of it to this rank was never taken)";

std::string status_text(ucs_status_t s) { return ucs_status_string(s); }

[[noreturn]] void fail_setup(const ErrorContext& where, const std::string& what) {
  throw Error(ErrorCode::transport, where, what);
}

}  // namespace

// ---- Worker setup ----------------------------------------------------------------------------

Worker::Worker(Store& store, int rank, int size, const std::vector<bool>& network_watched,
               bool one_node, const ErrorContext& where, std::chrono::milliseconds timeout)
    : rank_(rank),
      size_(size),
      one_node_(one_node),
      context_(Context::get(scope(one_node, one_node ? std::string() : store.local_address()))),
      eps_(size, nullptr),
      where_(where) {
  if (size > tags::kMaxRanks) {
    fail_setup(where, std::to_string(size) + " ranks: message tags name at most " +
                          std::to_string(tags::kMaxRanks));
  }
  ErrorContext w = where;
  w.op = "ucx.connect";
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // one thread at a time: the communicator's executor
  ucs_status_t s = ucp_worker_create(context_->handle(), &wp, &worker_);
  if (s != UCS_OK) fail_setup(w, "ucp_worker_create: " + status_text(s));

  s = ucp_worker_get_efd(worker_, &event_fd_);
  if (s != UCS_OK) fail_setup(w, "ucp_worker_get_efd: " + status_text(s));
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  for (int fd : {event_fd_, wake_fd_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }

  // Failure notices and questions about calls may arrive at any time from any peer: keep one
  // receive of each kind posted.
  for (auto kind : {tags::Control::notice, tags::Control::query, tags::Control::answer}) {
    if (!post_control_receive(kind)) fail_setup(w, "cannot post the control-message receives");
  }

  // Publish our address, then connect to every peer's.
  ucp_address_t* addr = nullptr;
  size_t addr_len = 0;
  s = ucp_worker_get_address(worker_, &addr, &addr_len);
  if (s != UCS_OK) fail_setup(w, "ucp_worker_get_address: " + status_text(s));
  auto* a = reinterpret_cast<const uint8_t*>(addr);
  store.set("ucx/addr/" + std::to_string(rank), Bytes(a, a + addr_len));
  ucp_worker_release_address(worker_, addr);

  error_args_.resize(size_t(size));
  for (int peer = 0; peer < size; ++peer) {
    Bytes remote = bootstrap::get_published(store, "ucx/addr/" + std::to_string(peer), peer,
                                            "its UCX address", w, timeout);
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep.address = reinterpret_cast<const ucp_address_t*>(remote.data());
    if (network_watched[size_t(peer)]) {
      // A peer whose connection breaks (its process or node died) fails the endpoint instead of
      // leaving operations to their deadline.
      ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
      error_args_[size_t(peer)] = {this, peer};
      ep.err_handler.cb = &Worker::on_endpoint_error;
      ep.err_handler.arg = &error_args_[size_t(peer)];
    }
    s = ucp_ep_create(worker_, &ep, &eps_[peer]);
    if (s != UCS_OK) {
      w.peer = peer;
      fail_setup(w, "ucp_ep_create: " + status_text(s));
    }
  }
}

// ---- Messages ---------------------------------------------------------------------------------

void Worker::begin(uint64_t seq, const ErrorContext& where, Clock::time_point deadline) {
  // Left by a collective that threw outside a wait (a send that failed to start).
  if (!posted_.empty()) cancel_collective(Clock::now() + std::chrono::seconds(1));
  seq_ = seq;
  where_ = where;
  deadline_ = deadline;
  call_ = {};
  tag_call_ = 0;
}

void Worker::began(const transport::Call& call, bool tagged) {
  const uint64_t seq = seq_;
  const ErrorContext& where = where_;
  call_ = call;
  tag_call_ = tagged ? call.bits : 0;
  history_.began(seq, call);
  // A message of the call before last that this rank finished without taking: their calls
  // differed (each of two ranks called a broadcast from itself, say). A peer's messages arrive
  // in order, so one sent there is here once the last call took a later one from that peer.
  // (One probe, not two: each costs ~6 ns; the progress thread's look back sees the rest.)
  if (seq >= 2) {
    if (auto d = unclaimed(seq - 2)) {
      throw mismatch(where, d->mine, d->peer, d->theirs, kNeverTaken);
    }
  }
  if (watchdog_ && failed_) watchdog_->check(where);  // a failure reported while asking
}

Notice Worker::tell_mismatch(const transport::Call& mine, int peer, const transport::Call& theirs) {
  // The peers waiting on this rank, or on ranks waiting on it, learn of it at once.
  const Notice n{Notice::mismatch, int32_t(peer), int32_t(rank_), {mine, theirs}};
  send_notice(n);
  return n;
}

Error Worker::mismatch(const ErrorContext& where, const transport::Call& mine, int peer,
                       const transport::Call& theirs, const std::string& sizes) {
  tell_mismatch(mine, peer, theirs);
  ErrorContext w = where;
  w.peer = peer;
  return Error(ErrorCode::invalid_argument, w,
               "collective mismatch: this rank is in " + transport::describe_call(mine) +
                   ", rank " + std::to_string(peer) + " in " + transport::describe_call(theirs) +
                   sizes);
}

Error Worker::failure(ErrorCode code, int peer, const std::string& what) const {
  ErrorContext w = where_;
  w.peer = peer;
  return Error(code, w, what);
}

transport::Request Worker::post(bool recv, int peer, void* data, size_t bytes, uint64_t tag,
                                uint64_t mask) {
  transport::Request r;
  r.peer = peer;
  r.bytes = bytes;
  r.is_recv = recv;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  p.datatype = ucp_dt_make_contig(1);
  ucs_status_ptr_t sp;
  if (recv) {
    p.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;  // always a request, so the size can be checked
    sp = ucp_tag_recv_nbx(worker_, data, bytes, tag, mask, &p);
  } else {
    sp = ucp_tag_send_nbx(eps_[peer], data, bytes, tag, &p);
  }
  if (UCS_PTR_IS_ERR(sp)) {
    throw failure(ErrorCode::transport, peer,
                  std::string(recv ? "receive" : "send") + " of " + std::to_string(bytes) +
                      " bytes failed to start: " + status_text(UCS_PTR_STATUS(sp)));
  }
  r.handle = sp;  // nullptr: a send that completed at once
  return r;
}

uint64_t Worker::collective_tag(int src, uint32_t step) const {
  if (step >> tags::kStepBits) {
    throw Error(ErrorCode::internal, where_,
                "collective message step " + std::to_string(step) + " does not fit the tag's " +
                    std::to_string(tags::kStepBits) + " bits (src/transport/tags.hpp)");
  }
  return tags::collective(seq_, src, step, tag_call_);
}

transport::Request Worker::isend(int peer, const void* data, size_t bytes, uint32_t step) {
  auto r = post(false, peer, const_cast<void*>(data), bytes, collective_tag(rank_, step));
  if (r.handle) posted_.push_back(r.handle);
  return r;
}

transport::Request Worker::irecv(int peer, void* data, size_t bytes, uint32_t step) {
  // Any call's message matches: test() compares the call once it has arrived.
  auto r = post(true, peer, data, bytes, collective_tag(peer, step), kFullMask & ~tags::kCallMask);
  posted_.push_back(r.handle);
  return r;
}

transport::Request Worker::post_send(int peer, const void* data, size_t bytes, uint32_t tag) {
  return post(false, peer, const_cast<void*>(data), bytes, tags::p2p(rank_, tag));
}

transport::Request Worker::post_recv(int peer, void* data, size_t bytes, uint32_t tag) {
  if (peer >= 0) return post(true, peer, data, bytes, tags::p2p(peer, tag));
  // Any source: every bit but the source's must match (so never a control notice, bit 62).
  return post(true, -1, data, bytes, tags::p2p(0, tag), kFullMask & ~tags::kSourceBits);
}

bool Worker::test(transport::Request& r, const ErrorContext& where) {
  if (!r.handle) return true;
  ucs_status_t s;
  size_t got = r.bytes;
  ucp_tag_recv_info_t info{};
  if (r.is_recv) {
    s = ucp_tag_recv_request_test(r.handle, &info);
    got = info.length;
    if (s == UCS_OK && r.peer < 0) r.peer = tags::source_of_p2p(info.sender_tag);
  } else {
    s = ucp_request_check_status(r.handle);
  }
  if (s == UCS_INPROGRESS) return false;
  release(r.handle);
  r.handle = nullptr;
  ErrorContext w = where;
  w.peer = r.peer;
  const bool arrived = s == UCS_OK || s == UCS_ERR_MESSAGE_TRUNCATED;
  if (r.is_recv && arrived && tags::is_collective(info.sender_tag)) {
    const uint32_t theirs = tags::call_of(info.sender_tag);
    if (theirs != tag_call_) throw mismatch(where, call_, r.peer, {theirs}, "");
    if (s == UCS_ERR_MESSAGE_TRUNCATED || got != r.bytes) {
      throw mismatch(
          where, call_, r.peer, {theirs, call_.root, -1},
          " with another count (it sent " +
              (s == UCS_OK ? std::to_string(got) : "more than " + std::to_string(r.bytes)) +
              " bytes where this rank expected " + std::to_string(r.bytes) + ")");
    }
  }
  if (s == UCS_ERR_MESSAGE_TRUNCATED) {
    throw Error(ErrorCode::invalid_argument, w,
                "size mismatch: peer sent more than the " + std::to_string(r.bytes) +
                    " bytes expected (do the ranks pass the same counts and dtypes?)");
  }
  if (s != UCS_OK) {
    throw Error(ErrorCode::transport, w,
                std::string(r.is_recv ? "receive" : "send") + " failed: " + status_text(s));
  }
  if (r.is_recv && got != r.bytes) {
    throw Error(ErrorCode::invalid_argument, w,
                "size mismatch: expected " + std::to_string(r.bytes) + " bytes, peer sent " +
                    std::to_string(got) + " (do the ranks pass the same counts and dtypes?)");
  }
  return true;
}

}  // namespace strata::ucx
