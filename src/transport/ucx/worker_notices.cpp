// The worker's failure channel and its sleep: UCX's endpoint errors, the failure and mismatch
// notices ranks send each other on the control receives always posted (tags::Control), and
// progress with sleeping on the worker's event fd. The rest of the worker: worker.cpp (setup and
// messages), worker_calls.cpp (comparing calls), worker_wait.cpp (waits), worker_close.cpp
// (leaving).
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/log.hpp"
#include "transport/tags.hpp"
#include "transport/ucx/worker.hpp"

namespace strata::ucx {

namespace tags = transport::tags;

// ---- Failure notices ---------------------------------------------------------------------------

void Worker::on_endpoint_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* who = static_cast<std::pair<Worker*, int>*>(arg);
  int none = -1;
  if (who->first->unreachable_peer_.compare_exchange_strong(none, who->second)) {
    who->first->unreachable_status_ = int(status);
  }
}

bool Worker::post_control_receive(tags::Control kind) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  p.datatype = ucp_dt_make_contig(1);
  void* buffer = &notice_in_;
  size_t bytes = sizeof notice_in_;
  void** request = &notice_request_;
  if (kind != tags::Control::notice) {  // (notices are polled by poll_failure())
    buffer = kind == tags::Control::query ? static_cast<void*>(&query_in_) : &answer_in_;
    bytes = kind == tags::Control::query ? sizeof query_in_ : sizeof answer_in_;
    request = kind == tags::Control::query ? &query_request_ : &answer_request_;
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv = [](void*, ucs_status_t, const ucp_tag_recv_info_t*, void* self) {
      static_cast<Worker*>(self)->control_arrived_ = true;
    };
    p.user_data = this;
  }
  ucs_status_ptr_t r =
      ucp_tag_recv_nbx(worker_, buffer, bytes, tags::control(0, kind), ~tags::kSourceBits, &p);
  *request = UCS_PTR_IS_ERR(r) ? nullptr : r;
  // One that matched a waiting message may have completed without its callback.
  if (*request && ucp_request_check_status(*request) != UCS_INPROGRESS) control_arrived_ = true;
  return *request != nullptr;
}

std::optional<Notice> Worker::poll_failure() {
  if (found_) {
    failed_ = true;
    return std::exchange(found_, std::nullopt);
  }
  progress();
  if (notice_request_ && ucp_request_check_status(notice_request_) != UCS_INPROGRESS) {
    const ucs_status_t s = ucp_request_check_status(notice_request_);
    ucp_request_free(notice_request_);
    const Notice got = notice_in_;
    // Later notices (other survivors') are absorbed, not left unmatched.
    post_control_receive(tags::Control::notice);
    if (s == UCS_OK && got.culprit >= 0 && got.culprit < size_ && got.reporter >= 0 &&
        got.reporter < size_) {
      failed_ = true;
      return got;
    }
    STRATA_LOG(WARN, "NET") << "ignored a malformed failure notice (" << ucs_status_string(s)
                            << ")";
  }
  const int peer = unreachable_peer_.load();
  if (peer >= 0) {
    failed_ = true;
    STRATA_LOG(WARN, "NET") << "endpoint to rank " << peer << " failed: "
                            << ucs_status_string(ucs_status_t(unreachable_status_.load()));
    return Notice{Notice::unreachable, peer, rank_};
  }
  return std::nullopt;
}

void Worker::send_notice(const Notice& n) {
  failed_ = true;
  std::vector<void*> sending;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  p.datatype = ucp_dt_make_contig(1);
  notice_out_ = n;  // a member: a send still in flight after the bound below keeps a valid buffer
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_ || !eps_[size_t(peer)]) continue;
    const bool alive = n.kind == Notice::mismatch || n.kind == Notice::counts;
    if (peer == n.culprit && !alive) continue;  // it is gone
    ucs_status_ptr_t r = ucp_tag_send_nbx(eps_[size_t(peer)], &notice_out_, sizeof notice_out_,
                                          tags::control(rank_, tags::Control::notice), &p);
    if (UCS_PTR_IS_PTR(r)) sending.push_back(r);
  }
  // A send UCX calls complete may still sit in its transmit buffer (TCP, behind a collective's
  // data): the flush gets it onto the wire, so a rank that exits next still tells the others.
  ucp_request_param_t f{};
  ucs_status_ptr_t flush = ucp_worker_flush_nbx(worker_, &f);
  if (UCS_PTR_IS_PTR(flush)) sending.push_back(flush);
  const auto until = Clock::now() + std::chrono::milliseconds(200);
  for (void* r : sending) {
    while (ucp_request_check_status(r) == UCS_INPROGRESS && Clock::now() < until) progress();
    ucp_request_free(r);  // UCX releases one still in flight when it completes
  }
}

// ---- Progress and sleep ------------------------------------------------------------------------

bool Worker::progress() {
  const bool moved = ucp_worker_progress(worker_) != 0;
  if (control_arrived_) take_control();
  return moved;
}

// BUSY means events arrived since the last progress: the caller must progress, not sleep.
bool Worker::arm() { return ucp_worker_arm(worker_) != UCS_ERR_BUSY; }

void Worker::wait_event(Clock::time_point until) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
  int ms = int(std::clamp<int64_t>(left.count() + 1, 0, 100));
  epoll_event ev[2];
  int n = ::epoll_wait(epoll_fd_, ev, 2, ms);
  for (int i = 0; i < n; ++i) {
    if (ev[i].data.fd == wake_fd_) {
      uint64_t v;
      ssize_t ignored = ::read(wake_fd_, &v, sizeof v);
      (void)ignored;
    }
  }
}

void Worker::wake() {
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
  (void)ignored;
}

}  // namespace strata::ucx
