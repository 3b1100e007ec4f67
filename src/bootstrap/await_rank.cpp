#include "bootstrap/await_rank.hpp"

#include <algorithm>
#include <sstream>

namespace strata::bootstrap {
namespace {

// How often a sliced wait asks whether to give up (in_slices).
constexpr auto kSlice = std::chrono::milliseconds(250);
const std::string kCount = "failed/count";
const std::string kFirst = "failed/first";

}  // namespace

std::optional<Error> reported_failure(Store& store, const ErrorContext& where) {
  try {
    if (store.add(kCount, 0) == 0) return std::nullopt;
    Bytes b = store.get(kFirst, std::chrono::seconds(2));
    std::istringstream in(std::string(b.begin(), b.end()));  // "<culprit> <code> <what>"
    ErrorContext w = where;
    int code = int(ErrorCode::peer_failure);
    in >> w.peer >> code;
    std::string rest;
    std::getline(in, rest);
    // The reporter's kind of failure: a rank that timed out waiting for a missing rank makes the
    // others fail with a timeout too, naming the same rank.
    const bool known = code == int(ErrorCode::timeout) || code == int(ErrorCode::peer_failure);
    return Error(known ? ErrorCode(code) : ErrorCode::peer_failure, w,
                 "setup failed elsewhere:" + rest);
  } catch (const Error& gone) {
    // A store served by a rank of the job (rank 0, under from_env) that is gone means that
    // rank's process ended; failing on its own it keeps serving until the others have read its
    // report (job_store.hpp). So it died first, and a rank that saw its death and exited is an
    // echo: a rank whose connection to that echo failed must still name the store's host (a
    // start-up kill of rank 0 had rank 2 name rank 1). Any other store error teaches nothing.
    if (gone.code() != ErrorCode::peer_failure || gone.where().peer < 0) return std::nullopt;
    ErrorContext w = where;
    w.peer = gone.where().peer;
    return Error(ErrorCode::peer_failure, w, std::string("setup failed and ") + gone.what());
  }
}

void report_failure(Store& store, const Error& e) {
  if (e.where().peer < 0) return;
  try {
    if (store.add(kCount, 1) != 1) return;  // someone else's report stands
    const std::string text = std::to_string(e.where().peer) + " " + std::to_string(int(e.code())) +
                             " rank " + std::to_string(e.where().rank) + " reported: " + e.what();
    store.set(kFirst, Bytes(text.begin(), text.end()));
  } catch (const Error&) {
  }
}

bool in_slices(std::chrono::milliseconds timeout,
               const std::function<void(std::chrono::milliseconds)>& call,
               const std::function<bool()>& stop) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    try {
      call(std::clamp(left, std::chrono::milliseconds(1), std::chrono::milliseconds(kSlice)));
      return true;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::timeout || left <= kSlice) throw;
    }
    if (stop()) return false;
  }
}

std::string gone_key(int rank) { return "gone/" + std::to_string(rank); }

Bytes get_published(Store& store, const std::string& key, int owner, const std::string& what,
                    const ErrorContext& where, std::chrono::milliseconds timeout) {
  const std::string who = "rank " + std::to_string(owner);
  ErrorContext w = where;
  w.peer = owner;
  Bytes value;
  std::optional<Error> report;  // another rank's failure, thrown as it reported it
  bool gone = false;            // the owner's connection to the store closed
  auto give_up = [&] {
    if ((report = reported_failure(store, where))) return true;
    try {
      gone = store.add(gone_key(owner), 0) != 0;  // set_when_gone's '1' reads as a counter
    } catch (const Error&) {
    }
    return gone;
  };
  try {
    if (in_slices(
            timeout, [&](std::chrono::milliseconds slice) { value = store.get(key, slice); },
            give_up)) {
      return value;
    }
    // It may have published, then exited, between the last try and the check.
    if (gone) return store.get(key, std::chrono::milliseconds(0));
  } catch (const Error& e) {
    if (gone && e.code() == ErrorCode::timeout) {
      throw Error(ErrorCode::peer_failure, w,
                  who + " is gone: its connection to the job's store closed before it published " +
                      what + " (its process exited or was killed; see its own output)");
    }
    if (e.code() == ErrorCode::peer_failure && e.where().peer >= 0) throw;  // culprit known
    if (e.code() == ErrorCode::timeout) {
      throw Error(ErrorCode::timeout, w,
                  "timed out after " + std::to_string(timeout.count()) + " ms waiting for " + who +
                      " to publish " + what + " (store key '" + key + "'; is " + who +
                      " alive and creating the same communicator?)");
    }
    if (e.code() == ErrorCode::peer_failure) {
      throw Error(
          ErrorCode::peer_failure, w,
          "lost the store while waiting for " + who + " to publish " + what + ": " + e.what());
    }
    throw Error(e.code(), w, "waiting for " + who + " to publish " + what + ": " + e.what());
  }
  throw *report;
}

}  // namespace strata::bootstrap
