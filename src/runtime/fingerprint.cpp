#include "runtime/fingerprint.hpp"

#include <cstring>
#include <string_view>
#include <vector>

#include "transport/tags.hpp"

namespace strata::runtime {

namespace {

// Fixed-size and padding-free, so it can travel as bytes between ranks of one build.
struct Fingerprint {
  char op[24];
  int32_t dtype, root, reduce, pad;
  uint64_t count, seq;
  bool operator==(const Fingerprint& o) const { return std::memcmp(this, &o, sizeof o) == 0; }
};

// A step no algorithm uses, so the exchange never matches an algorithm's messages.
constexpr uint32_t kFingerprintStep = transport::tags::kFingerprint.first;

Fingerprint of(const Op& op) {
  Fingerprint f{};
  std::strncpy(f.op, op.where.op.c_str(), sizeof f.op - 1);
  f.dtype = int32_t(op.dtype);
  f.root = op.where.peer;
  f.reduce = op.reduce;
  // all_to_allv's ranks send different amounts by design; its counts are not compared.
  f.count = op.where.op == "all_to_allv" ? 0 : op.count;
  f.seq = uint64_t(op.where.seq);
  return f;
}

std::string describe(const Fingerprint& f) {
  const std::string_view op = f.op;
  std::string s;
  if (op != "barrier") {  // no data
    s += dtype_name(DataType(f.dtype));
    // all_to_allv's count is its rank's own, different by design: not part of the call.
    if (op != "all_to_allv") s += " x " + std::to_string(f.count);
    s += ", ";
  }
  if (f.reduce >= 0) s += std::string(op_name(ReduceOp(f.reduce))) + ", ";
  if (f.root >= 0) s += "root " + std::to_string(f.root) + ", ";
  return std::string(op) + "(" + s + "seq " + std::to_string(f.seq) + ")";
}

}  // namespace

void agree_on_fingerprint(transport::P2P& p2p, const Op& op) {
  const int n = p2p.size(), me = p2p.rank();
  if (n == 1) return;
  const Fingerprint mine = of(op);
  std::vector<Fingerprint> theirs(static_cast<size_t>(n), Fingerprint{});
  std::vector<transport::Request> reqs;
  for (int q = 0; q < n; ++q) {
    if (q == me) continue;
    reqs.push_back(p2p.irecv(q, &theirs[size_t(q)], sizeof(Fingerprint), kFingerprintStep));
    reqs.push_back(p2p.isend(q, &mine, sizeof(Fingerprint), kFingerprintStep));
  }
  p2p.wait(reqs);
  for (int q = 0; q < n; ++q) {
    if (q == me || theirs[size_t(q)] == mine) continue;
    ErrorContext where = op.where;
    where.peer = q;
    throw Error(ErrorCode::invalid_argument, where,
                "collective mismatch (STRATA_CHECK=1): this rank called " + describe(mine) +
                    ", rank " + std::to_string(q) + " called " + describe(theirs[size_t(q)]));
  }
}

}  // namespace strata::runtime
