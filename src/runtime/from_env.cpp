// Communicator::from_env: the world communicator of a job started by mpirun, torchrun or
// strata-run.
#include <thread>

#include "base/log.hpp"
#include "bootstrap/job_env.hpp"
#include "bootstrap/job_store.hpp"
#include "runtime/communicator_impl.hpp"
#include "runtime/watched_store.hpp"
#include "strata/communicator.hpp"
#include "strata/error.hpp"
#include "transport/ucx/factory.hpp"

namespace strata {

Communicator Communicator::from_env(const CommOptions& options) {
  bootstrap::JobEnv env = bootstrap::read_job_env();
  log::set_rank(env.rank);
  try {
    auto store = bootstrap::connect_store(env, options.cancelled);
    std::shared_ptr<Store> prefixed = std::make_shared<PrefixStore>(store, options.name);
    const auto watched = runtime::watch_for_cancel(prefixed, options);
    CommOptions kept = options;
    kept.cancelled = nullptr;  // the caller's; asked only while the world is set up
    Communicator world = create(watched ? watched : prefixed, env.rank, env.size, kept);
    if (watched) watched->stop_watching();
    // A rank claimed by a second process (two jobs on one address): the world this process
    // serves may hold the other job's ranks. End it, telling every rank why, now or when the
    // claim comes (bootstrap/claim_conflict.hpp).
    const std::weak_ptr<Impl> weak = world.impl_;
    const std::string already =
        bootstrap::on_claim_conflict(*store, [weak](const std::string& why) {
          if (auto impl = weak.lock()) std::thread([impl, why] { impl->abort(why); }).detach();
        });
    if (!already.empty()) {
      world.impl_->abort(already);
      throw Error(ErrorCode::invalid_argument,
                  {.rank = env.rank, .group = options.name, .op = "init"}, already);
    }
    return world;
  } catch (const Error& e) {
    // A rank that died while the job met may have left UCX's files behind (ucx/stale_files.hpp).
    if (e.code() == ErrorCode::timeout || e.code() == ErrorCode::peer_failure) {
      ucx::reclaim_stale_files();
    }
    throw;
  }
}

}  // namespace strata
