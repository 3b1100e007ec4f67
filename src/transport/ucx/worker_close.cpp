// Leaving: the worker's destructor, and the goodbyes that let it close its endpoints without a
// flush. Closing an endpoint with a flush needs the peer's worker to answer; over TCP a peer that
// left first answers with a broken connection, and UCX logged "error during flush: Endpoint
// timeout" at every clean exit of a job over more than one node (10 such lines from a 2 x 4
// strata-perf run, 26-91 from strata-gpt). A peer that said goodbye has ended every operation of
// this communicator, so nothing this rank sends it is still needed and its endpoint closes at
// once; the others still get their flush. On one node UCX keeps to shared memory, whose flush
// needs no answer: no goodbyes there.
#include <algorithm>
#include <functional>
#include <utility>

#include "base/log.hpp"
#include "transport/tags.hpp"
#include "transport/ucx/worker.hpp"

namespace strata::ucx {

namespace tags = transport::tags;

std::vector<bool> Worker::part(Clock::time_point until) {
  static const uint8_t kGoodbye = 0;
  std::vector<void*> sends(size_t(size_), nullptr);
  goodbyes_.assign(size_t(size_), nullptr);
  goodbye_in_.assign(size_t(size_), 0);  // a member: a goodbye may land after part() returns
  std::vector<bool> close_now(size_t(size_), false);
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  p.datatype = ucp_dt_make_contig(1);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_ || !eps_[size_t(peer)]) continue;
    ucs_status_ptr_t r =
        ucp_tag_recv_nbx(worker_, &goodbye_in_[size_t(peer)], 1,
                         tags::control(peer, tags::Control::goodbye), ~uint64_t(0), &p);
    if (!UCS_PTR_IS_ERR(r)) goodbyes_[size_t(peer)] = r;
    ucs_status_ptr_t s = ucp_tag_send_nbx(eps_[size_t(peer)], &kGoodbye, 1,
                                          tags::control(rank_, tags::Control::goodbye), &p);
    if (UCS_PTR_IS_ERR(s)) close_now[size_t(peer)] = true;  // its connection is gone: no flush
    if (UCS_PTR_IS_PTR(s)) sends[size_t(peer)] = s;
  }
  auto under_way = [](void* r) { return r && ucp_request_check_status(r) == UCS_INPROGRESS; };
  while (Clock::now() < until && (std::any_of(sends.begin(), sends.end(), under_way) ||
                                  std::any_of(goodbyes_.begin(), goodbyes_.end(), under_way))) {
    if (!progress() && arm())
      wait_event(std::min(until, Clock::now() + std::chrono::milliseconds(10)));
  }
  for (size_t peer = 0; peer < size_t(size_); ++peer) {
    const ucs_status_t sent = sends[peer] ? ucp_request_check_status(sends[peer]) : UCS_OK;
    void*& r = goodbyes_[peer];
    const bool heard = r && ucp_request_check_status(r) == UCS_OK;
    // At once: a peer whose connection failed, or one that said goodbye and has ours (a goodbye
    // still under way needs the flush: the peer waits for it).
    if ((sent != UCS_OK && sent != UCS_INPROGRESS) || (heard && sent == UCS_OK))
      close_now[peer] = true;
    if (r && !under_way(r)) ucp_request_free(std::exchange(r, nullptr));
    if (sends[peer]) ucp_request_free(sends[peer]);  // UCX finishes one still under way
  }
  return close_now;
}

Worker::~Worker() {
  // Flush and close every endpoint, bounded: a peer that is already gone must not hold us here.
  auto until = Clock::now() + std::chrono::seconds(2);
  // A failed group's wait gave up its transfers under way; give them a second to end here, so
  // that none is left for ucp_worker_destroy (a dead peer's are purged with its endpoint).
  for (void* h : posted_) ucp_request_cancel(worker_, h);
  while (Clock::now() < until - std::chrono::seconds(1) &&
         std::any_of(posted_.begin(), posted_.end(),
                     [](void* h) { return ucp_request_check_status(h) == UCS_INPROGRESS; }))
    ucp_worker_progress(worker_);
  for (void* h : std::exchange(posted_, {})) ucp_request_free(h);
  // Goodbyes while the control receives still answer a peer's questions about its last calls.
  // A broken group's peers may never say it: their endpoints close at once anyway (below).
  const bool broken = failed_.load() || unreachable_peer_.load() >= 0;
  const std::vector<bool> parted = broken || one_node_
                                       ? std::vector<bool>(eps_.size(), false)
                                       : part(Clock::now() + std::chrono::seconds(1));
  until = std::max(until, Clock::now() + std::chrono::seconds(2));
  for (void*& request :
       {std::ref(notice_request_), std::ref(query_request_), std::ref(answer_request_)}) {
    if (!request) continue;
    ucp_request_cancel(worker_, request);
    while (ucp_request_check_status(request) == UCS_INPROGRESS && Clock::now() < until)
      ucp_worker_progress(worker_);
    ucp_request_free(request);
    request = nullptr;
  }
  for (auto& o : outgoing_) {
    if (o.request) ucp_request_free(o.request);  // UCX releases one still in flight
  }
  // After a failure, flushing towards a dead peer can only time out: close at once; so too
  // towards a peer that said goodbye.
  std::vector<void*> closing;
  for (size_t peer = 0; peer < eps_.size(); ++peer) {
    if (!eps_[peer]) continue;
    ucp_request_param_t p{};
    if (broken || parted[peer]) {
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    }
    void* r = ucp_ep_close_nbx(eps_[peer], &p);
    if (UCS_PTR_IS_PTR(r)) closing.push_back(r);
  }
  for (void* r : closing) {
    while (ucp_request_check_status(r) == UCS_INPROGRESS && Clock::now() < until) progress();
    if (ucp_request_check_status(r) == UCS_INPROGRESS) {
      STRATA_LOG(WARN, "NET") << "endpoint close did not finish in 2 s; forcing";
    }
    ucp_request_free(r);
  }
  // Goodbyes of peers that stay longer: taken until now, so that UCX does not warn of them as
  // messages nobody took.
  for (void* r : goodbyes_) {
    if (!r) continue;
    ucp_request_cancel(worker_, r);
    ucp_request_free(r);
  }
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (worker_) ucp_worker_destroy(worker_);
}

}  // namespace strata::ucx
