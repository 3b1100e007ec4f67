#include "train/failure_report.hpp"

#include <chrono>
#include <string>
#include <thread>

namespace gpt {

namespace {
const char kCount[] = "gpt/failed/count";
const char kFirst[] = "gpt/failed/first";
}  // namespace

FailureReport::FailureReport(std::shared_ptr<strata::Store> store, int world_rank, int world_size)
    : store_(std::move(store)), rank_(world_rank), size_(world_size) {}

void FailureReport::add_group(const std::string& name, std::vector<int> world_ranks,
                              strata::Communicator comm) {
  groups_[name] = std::move(world_ranks);
  if (comm) comms_.push_back(std::move(comm));
}

void FailureReport::abort_groups() {
  for (strata::Communicator& c : comms_) c.abort();
}

strata::Error FailureReport::attribute(const strata::Error& e) {
  if (e.code() != strata::ErrorCode::peer_failure && e.code() != strata::ErrorCode::aborted)
    return e;
  const strata::ErrorContext& w = e.where();
  int seen = -1;  // the peer this rank saw fail, in world numbering
  if (auto g = groups_.find(w.group);
      g != groups_.end() && w.peer >= 0 && size_t(w.peer) < g->second.size())
    seen = g->second[size_t(w.peer)];
  int first = seen;
  bool store_gone = false;
  try {
    // First report wins; a later reporter waits (briefly) for the first one's value.
    if (store_->add(kCount, 1) == 1) {
      const std::string v = std::to_string(seen);
      store_->set(kFirst, strata::Bytes(v.begin(), v.end()));
    } else {
      const strata::Bytes v = store_->get(kFirst, std::chrono::seconds(2));
      first = std::stoi(std::string(v.begin(), v.end()));
    }
  } catch (const strata::Error& err) {
    // Rank 0 serves the store and, failing itself, keeps it up until the others have reported:
    // a store that is gone means rank 0 died. (A report that never came: this rank's finding.)
    store_gone = err.code() != strata::ErrorCode::timeout;
    if (store_gone) first = 0;
  }
  abort_groups();
  if (rank_ == 0) {  // the store's host: keep it up until every survivor has read the report
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    try {
      while (store_->add(kCount, 0) < size_ - 1 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    } catch (const std::exception&) {
    }
  }
  if (first < 0) return e;
  std::string what = "world rank " + std::to_string(first) + " died";
  if (store_gone)
    what += " (the job's store, which it served, is gone)";
  else if (first != seen)
    what += " (reported first by another rank; this rank saw " +
            (seen >= 0 ? "world rank " + std::to_string(seen) : std::string("a peer")) + " fail)";
  what += ": " + std::string(e.what());
  return strata::Error(strata::ErrorCode::peer_failure,
                       {.rank = rank_, .group = "world", .op = w.op, .seq = w.seq, .peer = first},
                       what);
}

}  // namespace gpt
