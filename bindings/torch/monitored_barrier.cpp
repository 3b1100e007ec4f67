// ProcessGroupStrata::monitoredBarrier: a barrier that says which ranks did not arrive. Rank 0
// waits for a token from every other rank, within the timeout, then answers each; the others
// send theirs and wait for the answer. The messages are gloo's, which torch's tests and users'
// log scrapers know.
#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

#include <sstream>

#include "process_group.hpp"
#include "strata/error.hpp"
#include "tensors.hpp"

namespace strata::torch_backend {
namespace {

// Above every tag torch can pass (an int >= 0), so never a user's message.
constexpr uint32_t kMonitorTag = 0x8000'0000u;

std::string join(const std::vector<int>& ranks) {
  std::ostringstream s;
  for (size_t i = 0; i < ranks.size(); ++i) s << (i ? ", " : "") << ranks[i];
  return s.str();
}

}  // namespace

void ProcessGroupStrata::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  TORCH_CHECK(comm_, "strata: rank ", getRank(), " used a process group after shutdown()");
  using std::chrono::milliseconds;
  const milliseconds timeout = deadline(opts.timeout);
  const auto start = std::chrono::steady_clock::now();
  const auto left = [&] {
    return std::chrono::duration_cast<milliseconds>(timeout -
                                                    (std::chrono::steady_clock::now() - start));
  };
  at::Tensor token = at::zeros({getSize()}, at::kByte);  // one byte per peer
  const auto byte = [&](int r) { return view(token.narrow(0, r, 1), "monitored_barrier"); };

  if (getRank() != 0) {
    try {
      const strata::Work sent = comm_.send(byte(getRank()), 0, kMonitorTag);
      const strata::Work answer = comm_.recv(byte(0), 0, kMonitorTag);
      sent.wait(std::max(left(), milliseconds(0)));
      answer.wait(std::max(left(), milliseconds(0)));
    } catch (const Error& e) {
      C10_THROW_ERROR(DistBackendError,
                      c10::str("Rank ", getRank(),
                               " successfully reached monitoredBarrier, but "
                               "received errors while waiting for send/recv from rank 0. "
                               "Please check rank 0 logs for faulty rank. (",
                               e.what(), ")"));
    }
    return;
  }

  std::vector<strata::Work> arrivals(getSize());
  for (int r = 1; r < getSize(); ++r) arrivals[r] = comm_.recv(byte(r), r, kMonitorTag);
  std::vector<int> failed, passed;
  for (int r = 1; r < getSize(); ++r) {
    // Waiting for all, each rank gets the whole timeout: the ranks after a missing one still
    // get their chance to be reported.
    const milliseconds wait = wait_all_ranks ? timeout : left();
    if (!wait_all_ranks && wait <= milliseconds(0)) {
      C10_THROW_ERROR(DistBackendError,
                      c10::str("Rank 0 timed out in monitoredBarrier after ", timeout.count(),
                               " ms. Successfully processed ranks: ", join(passed)));
    }
    try {
      arrivals[r].wait(wait);
      passed.push_back(r);
    } catch (const Error&) {
      if (!wait_all_ranks) {
        C10_THROW_ERROR(DistBackendError,
                        c10::str("[Rank 0]: Rank ", r, " failed to pass monitoredBarrier in ",
                                 timeout.count(), " ms"));
      }
      failed.push_back(r);
    }
  }
  if (!failed.empty()) {
    C10_THROW_ERROR(DistBackendError,
                    c10::str("[Rank 0]: Ranks ", join(failed),
                             " failed to pass monitoredBarrier in ", timeout.count(), " ms"));
  }
  std::vector<strata::Work> answers;
  for (int r = 1; r < getSize(); ++r) answers.push_back(comm_.send(byte(0), r, kMonitorTag));
  for (const auto& a : answers) a.wait(std::max(left(), milliseconds(1)));
}

}  // namespace strata::torch_backend
