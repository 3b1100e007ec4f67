#include "device/path.hpp"

#include <map>

namespace strata::device {

Path choose_path(const std::vector<std::string>& uuids, bool have_nccl, std::string_view forced,
                 const ErrorContext& where) {
  if (forced == "staged") return Path::staged;
  std::string shared, gpu;  // "ranks 0 and 1", the first pair that shares a GPU, and it
  std::map<std::string, size_t> first;
  for (size_t r = 0; r < uuids.size() && shared.empty(); ++r) {
    auto [it, fresh] = first.emplace(uuids[r], r);
    if (!fresh) {
      shared = "ranks " + std::to_string(it->second) + " and " + std::to_string(r);
      gpu = uuids[r];
    }
  }
  if (forced == "nccl") {
    if (!have_nccl) {
      throw Error(ErrorCode::invalid_argument, where,
                  "STRATA_DEVICE_PATH=nccl, but this build of Strata has no NCCL");
    }
    if (!shared.empty()) {
      throw Error(ErrorCode::invalid_argument, where,
                  "STRATA_DEVICE_PATH=nccl, but " + shared + " share GPU " + gpu +
                      " and NCCL refuses two ranks on one GPU (the staged path serves them)");
    }
    return Path::nccl;
  }
  return have_nccl && shared.empty() ? Path::nccl : Path::staged;
}

std::string shared_gpu_advice(const std::vector<std::string>& uuids,
                              const std::vector<int>& visible) {
  std::map<std::string, std::vector<size_t>> ranks;  // GPU -> the ranks on it
  for (size_t r = 0; r < uuids.size(); ++r) ranks[uuids[r]].push_back(r);
  for (const auto& [gpu, on] : ranks) {
    if (on.size() < 2) continue;
    for (size_t r : on) {
      if (visible.at(r) < 2) continue;
      return "ranks " + std::to_string(on[0]) + " and " + std::to_string(on[1]) +
             (on.size() > 2 ? " (and " + std::to_string(on.size() - 2) + " more)" : "") +
             " share GPU " + gpu + " though rank " + std::to_string(r) + " sees " +
             std::to_string(visible[r]) +
             " GPUs: their device calls are staged through host memory, far slower than NCCL. "
             "Give each rank its own GPU: cudaSetDevice(LOCAL_RANK % count), or "
             "torch.cuda.set_device(local_rank), before the first device call";
    }
  }
  return {};
}

}  // namespace strata::device
