#include "store/refusal_log.hpp"

#include "base/log.hpp"

namespace strata::store {
namespace {

constexpr auto kSummaryEvery = std::chrono::minutes(1);

const char* name(Refusal r) {
  switch (r) {
    case Refusal::malformed:
      return "malformed or misplaced frames";
    case Refusal::wrong_token:
      return "wrong job token";
    case Refusal::silent:
      return "no HELLO in time";
    case Refusal::cut_short:
      return "closed in the middle of a frame";
    case Refusal::flooding:
      return "sent while a request was pending";
    case Refusal::crowded_out:
      return "too many unauthenticated connections";
    case Refusal::full:
      return "too many connections";
    case Refusal::internal:
      return "internal error";
  }
  return "?";
}

}  // namespace

void RefusalLog::refused(Refusal cause, const std::string& peer, const std::string& detail) {
  const size_t i = size_t(cause);
  if (seen_[i]) {
    ++unlogged_[i];
    return;
  }
  seen_[i] = true;
  STRATA_LOG(WARN, "STORE") << "refused connection from " << peer << ": " << detail << " ["
                            << name(cause) << "; more of these are counted, not logged]";
}

void RefusalLog::summarize(Clock::time_point now, bool now_or_never) {
  if (!now_or_never && now - last_summary_ < kSummaryEvery) return;
  last_summary_ = now;
  for (size_t i = 0; i < kRefusals; ++i) {
    if (unlogged_[i] == 0) continue;
    STRATA_LOG(WARN, "STORE") << "refused " << unlogged_[i] << " more connections ["
                              << name(Refusal(i)) << "]";
    unlogged_[i] = 0;
  }
}

}  // namespace strata::store
