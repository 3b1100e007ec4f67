#include "parallel/context_parallel.hpp"

#include <stdexcept>
#include <string>

namespace gpt {

CpComm parse_cp_comm(std::string_view name) {
  if (name == "p2p") return CpComm::p2p;
  if (name == "a2a") return CpComm::a2a;
  throw std::invalid_argument("--cp-comm '" + std::string(name) + "': p2p or a2a");
}

std::string_view cp_comm_name(CpComm c) { return c == CpComm::p2p ? "p2p" : "a2a"; }

void ContextParallel::sum(std::span<double> v) {
  cp_.all_reduce(strata::buffer(v), strata::ReduceOp::sum).wait();
}

void ContextParallel::all_gather(std::span<const float> mine, std::span<float> all) {
  cp_.all_gather(strata::buffer(mine), strata::buffer(all)).wait();
}

std::unique_ptr<ContextParallel> make_context_parallel(strata::Communicator cp, CpComm mode) {
  return mode == CpComm::p2p ? make_ring_attention(std::move(cp))
                             : make_ulysses_attention(std::move(cp));
}

}  // namespace gpt
