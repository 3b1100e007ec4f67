#include "runtime/communicator_impl.hpp"

#include "base/config.hpp"
#include "base/log.hpp"
#include "bootstrap/node_identity.hpp"
#include "runtime/device_path.hpp"
#include "runtime/fingerprint.hpp"
#include "runtime/group_view.hpp"
#include "shm/sync.hpp"
#include "transport/calls/call_bits.hpp"
#include "transport/solo/factory.hpp"
#include "transport/ucx/factory.hpp"

namespace strata {

Communicator::Impl::Impl(std::shared_ptr<Store> store_in, int rank_in, int size_in,
                         const CommOptions& options)
    : rank(rank_in),
      size(size_in),
      name(options.name),
      store(std::move(store_in)),
      timeout_(options.timeout.count() > 0 ? options.timeout : config().timeout) {
  const auto timeout = timeout_;
  // Processes first: from here on, a rank that dies is named by its peers' waits.
  const bootstrap::NodeLayoutInfo where =
      bootstrap::node_layout(*store, rank, size, context("init"), timeout, runtime::my_links(rank));
  health_ = std::make_shared<transport::PeerHealth>(rank, where.process_of_rank);
  std::unique_ptr<transport::Transport> transport;
  try {
    std::vector<bool> network_watched;  // peers whose death the process table cannot show
    for (const auto& p : where.process_of_rank) network_watched.push_back(!p.observable());
    const algo::NodeLayout layout(where.node_of_rank);
    // A group of one talks only to itself: no UCX worker (transport/solo/).
    transport = size == 1 ? solo::make_transport()
                          : ucx::make_transport(*store, rank, size, network_watched,
                                                layout.nodes() == 1, context("init"), timeout);
    const int local = int(layout.ranks_of[size_t(layout.node_of_rank[size_t(rank)])].size());
    const bool oversubscribed = where.oversubscribed();
    transport->set_oversubscribed(oversubscribed);
    if (size > 1 && config().shm && local == size) {
      shm_ = std::make_unique<shm::Segment>(*store, rank, size, config().shm_chunk_bytes,
                                            config().shm_depth, oversubscribed, context("init"),
                                            timeout);
      shm_->set_watchdog(health_.get());
    }
    view_ = runtime::group_view(layout, where.links_of_rank, shm_ != nullptr, context("init"));
    if (view_.two_level()) {
      levels_ = std::make_unique<runtime::Levels>(layout, rank, name, store, health_, timeout);
    }
  } catch (const Error& e) {
    // The process table: "peer 2: endpoint timeout" may be "rank 2 died". (A report in the store
    // from a rank that gave up earlier still comes first: Communicator::create looks for one.)
    throw health_->explain(e);
  }
  queue_ = std::make_shared<runtime::OpQueue>(std::move(transport), health_, timeout);
  queue_->start();
  STRATA_LOG(INFO, "INIT") << "group " << name << ": rank " << rank << " of " << size
                           << ", transport "
                           << (size == 1 ? "none"
                               : shm_    ? "shm+ucx"
                                         : "ucx")
                           << ", timeout " << timeout.count() / 1000.0 << " s; " << view_.nodes
                           << " node(s), links " << runtime::describe_links(view_);
}

Communicator::Impl::~Impl() {
  // First, while the members its operations use are still here, and on this thread: a Work
  // that polls the queue may keep it alive, and its progress thread must not outlive them or
  // end up owning the queue (which it cannot destroy on itself).
  queue_->close();
}

const algo::Algorithm& Communicator::Impl::choose(algo::Collective c, size_t bytes) {
  const auto table = algo::algorithms(c);
  std::atomic<uint64_t>& memo = last_choice_[size_t(c)];
  const bool memoable = bytes < (uint64_t(1) << 56);
  if (const uint64_t m = memo.load(std::memory_order_relaxed);
      memoable && (m & 0xff) && m >> 8 == bytes) {
    return table[(m & 0xff) - 1];
  }
  const algo::Choice choice = algo::choose(c, view_, bytes);
  choice_log_.note(name, view_, c, bytes, choice);
  if (memoable) {
    memo.store(uint64_t(bytes) << 8 | uint64_t(choice.algo - table.data() + 1),
               std::memory_order_relaxed);
  }
  return *choice.algo;
}

void Communicator::Impl::abort(const std::string& why) {
  // The group first, so that a hierarchical collective whose legs end below reports this abort.
  health_->abort(why);
  if (levels_) levels_->abort();
  if (device && device->nccl) device->nccl->abort();
  queue_->abort(why);
}

ErrorContext Communicator::Impl::context(const char* op, int peer) {
  return ErrorContext{rank, name, op, int64_t(coll_seq_.load(std::memory_order_relaxed)), peer};
}

runtime::Checker Communicator::Impl::checker(const char* op, int peer, bool point_to_point) const {
  const auto& seq = point_to_point ? p2p_seq_ : coll_seq_;
  return {rank, name, op, int64_t(seq.load(std::memory_order_relaxed)), peer};
}

runtime::Op Communicator::Impl::next_collective(const char* op_name, int peer, Buffer data,
                                                int reduce) {
  runtime::Op op;
  op.dtype = data.dtype;
  op.count = data.count;
  op.reduce = reduce;
  const uint64_t seq = take_seq();
  op.where = ErrorContext{rank, name, op_name, int64_t(seq), peer};
  op.issued_by_all = issued_by_all(seq);
  return op;
}

uint64_t Communicator::Impl::take_seq() {
  const uint64_t seq = coll_seq_.fetch_add(1, std::memory_order_relaxed);
  if (shm_) shm::publish_issued(*shm_, seq + 1);
  return seq;
}

std::function<bool()> Communicator::Impl::issued_by_all(uint64_t seq) const {
  if (!shm_) return {};
  return [s = shm_.get(), seq] { return shm::all_issued(*s, seq + 1); };
}

Work Communicator::Impl::collective(const char* op_name, int peer, Buffer data, int reduce,
                                    size_t bytes, std::function<void(algo::Exec&)> body,
                                    ErrorContext* where) {
  runtime::Op op = next_collective(op_name, peer, data, reduce);
  op.bytes = bytes;
  if (where) *where = op.where;
  const uint64_t seq = uint64_t(op.where.seq);
  const transport::Call call{transport::call_bits(op_name, data.dtype, reduce), int32_t(peer),
                             int64_t(data.count)};
  op.run = [this, body = std::move(body), seq, call](transport::Transport& w, runtime::Op& self) {
    STRATA_LOG(TRACE, "COLL") << self.where.op << " seq " << seq << " on " << self.where.group;
    w.begin(seq, self.where, self.deadline);
    transport::CallCheck* calls = w.calls();
    if (config().check) {  // the full exchange, whose messages carry no call to check
      if (calls) calls->began(call, false);
      runtime::agree_on_fingerprint(w, self);
    }
    if (calls) calls->began(call, true);
    algo::Exec e{w,          shm_.get(), &write_modes_, levels_.get(), self.deadline,
                 self.where, &w,         &view_};
    body(e);
  };
  return Work(queue_->submit(std::move(op)));
}

void Communicator::Impl::refuse(const char* op_name, int peer, Buffer data, int reduce,
                                const Error& e) {
  runtime::Op op = next_collective(op_name, peer, data, reduce);  // its seq: the others' too
  const transport::Call call{transport::call_bits(op_name, data.dtype, reduce)};
  op.run = [this, call, e](transport::Transport& w, runtime::Op&) {
    transport::Notice n{transport::Notice::refused, int32_t(rank), int32_t(rank), {call, {}}};
    // The reason without this rank's context ("strata: scatter failed on rank 0 ...: "): the
    // others' errors give their own.
    const std::string what = e.what();
    const size_t cut = what.find("): ");
    what.copy(n.reason, sizeof n.reason - 1, cut == std::string::npos ? 0 : cut + 3);
    w.send_notice(n);
    throw e;
  };
  // Run now: the caller throws `e` next and may drop the group, and with it what is queued.
  try {
    Work(queue_->submit(std::move(op))).wait();
  } catch (const Error&) {  // `e` itself, which the caller throws
  }
}

Work Communicator::Impl::point_to_point(bool is_send, Buffer buf, int peer, uint32_t tag) {
  runtime::Op op;
  op.is_collective = false;
  op.bytes = buf.bytes();
  op.dtype = buf.dtype;
  op.count = buf.count;
  op.where = ErrorContext{rank, name, is_send ? "send" : "recv",
                          int64_t(p2p_seq_.fetch_add(1, std::memory_order_relaxed)), peer};
  op.run = [is_send, buf, peer, tag](transport::Transport& w, runtime::Op& self) {
    self.request = is_send ? w.post_send(peer, buf.data, buf.bytes(), tag)
                           : w.post_recv(peer, buf.data, buf.bytes(), tag);
  };
  return Work(queue_->submit(std::move(op)));
}

}  // namespace strata
