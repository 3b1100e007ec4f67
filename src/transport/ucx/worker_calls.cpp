// The Worker's half of comparing calls whole (transport/calls/call_history.hpp): the query and
// answer control messages, what a blocked wait does with an answer, and messages of finished calls
// that nobody took (docs/architecture.md, "Mismatches").
#include <cstring>

#include "base/log.hpp"
#include "transport/ucx/worker.hpp"

namespace strata::ucx {

namespace tags = transport::tags;

bool Worker::send_control(int peer, tags::Control kind, const void* data, size_t bytes) {
  if (peer < 0 || peer >= size_ || peer == rank_ || !eps_[size_t(peer)]) return false;
  for (auto& o : outgoing_) {
    if (o.request) {
      if (ucp_request_check_status(o.request) == UCS_INPROGRESS) continue;
      ucp_request_free(o.request);
      o.request = nullptr;
    }
    std::memcpy(o.data, data, bytes);
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
    p.datatype = ucp_dt_make_contig(1);
    ucs_status_ptr_t r =
        ucp_tag_send_nbx(eps_[size_t(peer)], o.data, bytes, tags::control(rank_, kind), &p);
    if (UCS_PTR_IS_ERR(r)) return false;
    o.request = r;  // nullptr: sent at once
    return true;
  }
  return false;  // all busy: the asker asks again
}

bool Worker::ask(int peer, uint64_t seq) {
  const transport::CallQuery q{seq};
  return send_control(peer, tags::Control::query, &q, sizeof q);
}

void Worker::take_control() {
  control_arrived_ = false;
  ucp_tag_recv_info_t info{};
  ucs_status_t s;
  if (query_request_ && (s = ucp_tag_recv_request_test(query_request_, &info)) != UCS_INPROGRESS) {
    ucp_request_free(query_request_);
    const transport::CallQuery q = query_in_;
    post_control_receive(tags::Control::query);
    if (s == UCS_OK) {
      const transport::CallAnswer a = history_.answer(q);
      send_control(tags::source_of_p2p(info.sender_tag), tags::Control::answer, &a, sizeof a);
    }
  }
  if (answer_request_ &&
      (s = ucp_tag_recv_request_test(answer_request_, &info)) != UCS_INPROGRESS) {
    ucp_request_free(answer_request_);
    const transport::CallAnswer a = answer_in_;
    post_control_receive(tags::Control::answer);
    const int from = tags::source_of_p2p(info.sender_tag);
    if (s == UCS_OK && from < size_) answer_ = {from, a};
  }
}

std::optional<Error> Worker::answered_mismatch() {
  if (!answer_ || answer_->second.seq != seq_) return std::nullopt;
  const auto [peer, a] = *answer_;
  answer_.reset();
  if (!a.known || transport::compatible(call_, a.call)) return std::nullopt;
  return mismatch(where_, call_, peer, a.call, "");
}

std::optional<Worker::Discord> Worker::unclaimed(uint64_t seq) {
  const auto mine = history_.at(seq);
  ucp_tag_recv_info_t info{};
  if (!mine || !ucp_tag_probe_nb(worker_, tags::collective(seq, 0, 0), tags::kSeqMask, 0, &info))
    return std::nullopt;
  const int peer = tags::source_of_collective(info.sender_tag);
  if (peer >= size_ || peer == rank_) return std::nullopt;
  // Its tag tells the call's kind, dtype and reduction; the peer tells the rest, if it answers
  // within a second (between operations it does within 250 ms: OpQueue's look back). A failure
  // reported meanwhile (another rank found this mismatch first) stands: the others name it too.
  transport::Call theirs{tags::call_of(info.sender_tag)};
  answer_.reset();
  if (ask(peer, seq)) {
    const auto until = Clock::now() + std::chrono::seconds(1);
    auto answered = [&] { return answer_ && answer_->first == peer && answer_->second.seq == seq; };
    while (!answered() && Clock::now() < until) {
      if (group_failed()) return std::nullopt;
      if (!progress()) sleep(std::min(until, Clock::now() + std::chrono::milliseconds(10)));
    }
    if (answered() && answer_->second.known) theirs = answer_->second.call;
    answer_.reset();
  }
  if (!transport::compatible(*mine, theirs)) return Discord{*mine, peer, theirs};
  if (warned_seq_ != seq) {  // equal calls whose messages differ: the algorithms chosen do
    warned_seq_ = seq;
    STRATA_LOG(WARN, "NET") << "rank " << peer << " sent this rank a message of "
                            << transport::describe_call(*mine) << " (seq " << seq
                            << ") that its algorithm never took; do the ranks choose their "
                               "algorithms alike (STRATA_* settings)?";
  }
  return std::nullopt;
}

bool Worker::look_back() {
  progress();  // answers the questions that came meanwhile
  for (uint64_t back = 0; !found_ && !failed_ && !history_.empty() &&
                          back < transport::CallHistory::kDepth && back <= history_.latest();
       ++back) {
    if (auto d = unclaimed(history_.latest() - back)) {
      found_ = tell_mismatch(d->mine, d->peer, d->theirs);
    }
  }
  return found_.has_value() || failed_;
}

}  // namespace strata::ucx
