#include "comm/communicator_impl.hpp"

#include "bootstrap/await_rank.hpp"
#include "bootstrap/node_identity.hpp"
#include "comm/fingerprint.hpp"
#include "config.hpp"
#include "log.hpp"

namespace strata {

Communicator::Impl::Impl(std::shared_ptr<Store> store_in, int rank_in, int size_in,
                         const CommOptions& options)
    : rank(rank_in),
      size(size_in),
      name(options.name),
      store(std::move(store_in)),
      layout_({}),
      timeout_(options.timeout.count() > 0 ? options.timeout : config().timeout) {
  const auto timeout = timeout_;
  // Processes first: from here on, a rank that dies is named by its peers' waits.
  const bootstrap::NodeLayoutInfo where =
      bootstrap::node_layout(*store, rank, size, context("init"), timeout);
  health_ = std::make_shared<comm::PeerHealth>(rank, where.process_of_rank);
  std::unique_ptr<ucx::Worker> worker;
  try {
    std::vector<bool> network_watched;  // peers whose death the process table cannot show
    for (const auto& p : where.process_of_rank) network_watched.push_back(!p.observable());
    worker = std::make_unique<ucx::Worker>(*store, rank, size, network_watched, context("init"),
                                           timeout);
    layout_ = comm::NodeLayout(where.node_of_rank);
    const int local = int(layout_.ranks_of[size_t(layout_.node_of_rank[size_t(rank)])].size());
    const bool oversubscribed = where.ranks_on_my_kernel > bootstrap::usable_cores();
    worker->set_oversubscribed(oversubscribed);
    if (size > 1 && config().shm && local == size) {
      shm_ = std::make_unique<shm::Segment>(*store, rank, size, config().shm_chunk_bytes,
                                            config().shm_depth, oversubscribed, context("init"),
                                            timeout);
      shm_->set_watchdog(health_.get());
    }
  } catch (const Error& e) {
    // A rank that reported another's death and then exited is not the culprit: its report first,
    // then the process table ("peer 2: endpoint timeout" may be "rank 2 died").
    if (auto report = bootstrap::reported_failure(*store, e.where())) throw *report;
    throw health_->explain(e);
  }
  engine_ = std::make_shared<comm::Engine>(std::move(worker), health_, timeout);
  engine_->start();
  STRATA_LOG(INFO, "INIT") << "group " << name << ": rank " << rank << " of " << size
                           << ", transport " << (shm_ ? "shm+ucx" : "ucx") << ", timeout " << timeout.count() / 1000.0 << " s";
}

coll::Algo Communicator::Impl::choose(coll::Collective c, size_t bytes) const {
  coll::GroupShape g;
  g.n = size;
  g.shm = shm_ != nullptr;
  g.two_level = layout_.spans_nodes_with_neighbours();
  g.even = layout_.even();
  return coll::choose(c, bytes, g);
}

comm::Hierarchy& Communicator::Impl::hierarchy(const ErrorContext& where) {
  if (hierarchy_) return *hierarchy_;
  try {
    hierarchy_ = std::make_unique<comm::Hierarchy>(layout_, rank, store, name, timeout_);
  } catch (const Error& e) {
    // A rank that never reaches this collective shows up here first, as a store key nobody set:
    // report it as this operation's failure.
    const bool late = e.code() == ErrorCode::timeout;
    throw Error(late ? ErrorCode::timeout : e.code(), where,
                std::string(late ? "timed out" : "failed") +
                    " setting up the node and rail groups of a hierarchical collective (" +
                    e.what() + ")");
  }
  return *hierarchy_;
}

void Communicator::Impl::abort() {
  engine_->abort();
  if (hierarchy_) {
    hierarchy_->local.abort();
    hierarchy_->rail.abort();
  }
}

ErrorContext Communicator::Impl::context(const char* op, int peer) {
  std::lock_guard<std::mutex> l(seq_mu_);
  return ErrorContext{rank, name, op, int64_t(coll_seq_), peer};
}

Work Communicator::Impl::collective(const char* op_name, int peer, Buffer data, int reduce,
                                    size_t bytes, std::function<void(Exec&)> body) {
  comm::Op op;
  op.bytes = bytes;
  op.dtype = data.dtype;
  op.count = data.count;
  op.reduce = reduce;
  uint64_t seq;
  {
    std::lock_guard<std::mutex> l(seq_mu_);
    seq = coll_seq_++;
  }
  op.where = ErrorContext{rank, name, op_name, int64_t(seq), peer};
  op.run = [this, body = std::move(body), seq](ucx::Worker& w, comm::Op& self) {
    STRATA_LOG(TRACE, "COLL") << self.where.op << " seq " << seq << " on " << self.where.group;
    w.begin_collective(seq, self.where, self.deadline);
    if (config().check) comm::agree_on_fingerprint(w, self);
    Exec e{w, shm_.get(), self.deadline, self.where};
    body(e);
  };
  return Work(engine_->submit(std::move(op)));
}

Work Communicator::Impl::point_to_point(bool is_send, Buffer buf, int peer, uint32_t tag) {
  comm::Op op;
  op.is_collective = false;
  op.bytes = buf.bytes();
  op.dtype = buf.dtype;
  op.count = buf.count;
  {
    std::lock_guard<std::mutex> l(seq_mu_);
    op.where = ErrorContext{rank, name, is_send ? "send" : "recv", int64_t(p2p_seq_++), peer};
  }
  op.run = [is_send, buf, peer, tag](ucx::Worker& w, comm::Op& self) {
    self.request = is_send ? w.post_send(peer, buf.data, buf.bytes(), tag)
                           : w.post_recv(peer, buf.data, buf.bytes(), tag);
  };
  return Work(engine_->submit(std::move(op)));
}

}  // namespace strata
