#include "runtime/levels.hpp"

#include <algorithm>

#include "runtime/calls.hpp"
#include "runtime/communicator_impl.hpp"
#include "runtime/watched_store.hpp"

namespace strata::runtime {

Levels::Levels(const algo::NodeLayout& layout, int rank, std::string name,
               std::shared_ptr<Store> store, std::shared_ptr<transport::PeerHealth> health,
               std::chrono::milliseconds timeout)
    : TwoLevel(layout, rank),
      name_(std::move(name)),
      store_(std::move(store)),
      health_(std::move(health)),
      timeout_(timeout) {}

algo::Leg Levels::start(algo::Level level, algo::Collective c, const algo::Args& a,
                        Clock::time_point deadline, const ErrorContext& where) {
  SubGroups& h = subgroups(where);
  Work work;
  try {
    work = call(level == algo::Level::node ? *h.local : *h.rail, c, a);
  } catch (const Error& sub) {
    fail(sub, where, deadline);
  }
  return [this, work, deadline, where] {
    try {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      work.wait(std::max(left, std::chrono::milliseconds(1)));
    } catch (const Error& sub) {
      fail(sub, where, deadline);
    }
  };
}

void Levels::abort() {
  if (subgroups_) {
    subgroups_->local->abort();
    subgroups_->rail->abort();
  }
}

SubGroups& Levels::subgroups(const ErrorContext& where) {
  if (subgroups_) return *subgroups_;
  try {
    // Setup waits end as soon as this group learns of a failure (this thread owns its worker).
    auto watched = std::make_shared<WatchedStore>(
        store_, [this] { return health_->await_news(Clock::now()); });
    subgroups_ = std::make_unique<SubGroups>(*this, watched, name_, timeout_);
  } catch (const Error& e) {
    // A rank that died while the sub-groups met: this group's processes and notices say who.
    if (health_->await_news(Clock::now())) throw health_->failure(where);
    // A rank that never reaches this collective shows up here first, as a store key nobody set:
    // report it as this operation's failure.
    const bool late = e.code() == ErrorCode::timeout;
    ErrorContext w = where;
    w.peer = group_rank_of(layout, name_, e.where());
    throw Error(late ? ErrorCode::timeout : e.code(), w,
                std::string(late ? "timed out" : "failed") +
                    " setting up the node and rail groups of a hierarchical collective (" +
                    e.what() + ")");
  }
  return *subgroups_;
}

void Levels::fail(const Error& sub, const ErrorContext& where, Clock::time_point deadline) {
  // How long a rank whose neighbour aborted their sub-group waits for that neighbour's reason,
  // which travels on this group (sent before the abort, but on another connection).
  constexpr auto kNewsGrace = std::chrono::seconds(2);
  const int culprit = group_rank_of(layout, name_, sub.where());
  const std::string seen = "(seen in " + sub.where().group + ": " + sub.what() + ")";
  if (sub.code() == ErrorCode::peer_failure && culprit >= 0) {
    // A notice already here names the rank that died first (the neighbour seen dead may have
    // exited after giving up because of it).
    if (!health_->await_news(Clock::now())) health_->report_failure(culprit, seen);
  } else if (sub.code() == ErrorCode::aborted) {
    const bool news = health_->await_news(std::min(deadline, Clock::now() + kNewsGrace));
    if (!news && culprit >= 0) health_->report_abort(culprit, seen);
  }
  abort();
  if (health_->failed()) throw health_->failure(where);
  ErrorContext w = where;  // a timeout or a transport error: the peer, by its rank here
  w.peer = culprit;
  throw Error(sub.code(), w, seen);
}

}  // namespace strata::runtime
