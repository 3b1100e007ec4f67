// STRATA_CHECK=1: before a collective moves any data, the ranks of the group exchange what each
// of them called (op, dtype, count, root, reduction, sequence number) and fail together, naming
// both calls, when they differ. Without it a mismatch would hang or corrupt memory.
#pragma once

#include <string>

#include "runtime/op_queue.hpp"
#include "transport/p2p.hpp"

namespace strata::runtime {

/// Exchanges `op`'s fingerprint with every rank of the group over `p2p` and throws
/// strata::Error(invalid_argument) on the first rank whose call differs. Collective.
void agree_on_fingerprint(transport::P2P& p2p, const Op& op);

}  // namespace strata::runtime
