// The choice between the device path's two ways (docs/device.md, "The two paths"): pure, so
// that it is tested on machines without a GPU.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "strata/error.hpp"

namespace strata::device {

enum class Path { nccl, staged };

/// The path of a group whose rank r holds the GPU `uuids[r]`: NCCL where every rank has its
/// own GPU and the build has NCCL; staged through host memory where ranks share one (NCCL
/// refuses a duplicate GPU) or there is no NCCL. `forced` (STRATA_DEVICE_PATH: "nccl",
/// "staged" or empty) decides instead; forcing NCCL where it cannot run throws
/// Error(invalid_argument, where) naming the ranks that share a GPU.
Path choose_path(const std::vector<std::string>& uuids, bool have_nccl, std::string_view forced,
                 const ErrorContext& where);

/// The usual mistake behind a shared GPU, where it is one: ranks that share a GPU though one of
/// them sees several (`visible[r]` devices: every rank left on device 0, no cudaSetDevice or
/// torch.cuda.set_device by LOCAL_RANK). Empty where no GPU is shared or the sharers see one
/// GPU each (a deliberate sharing: CUDA_VISIBLE_DEVICES, a one-GPU machine).
std::string shared_gpu_advice(const std::vector<std::string>& uuids,
                              const std::vector<int>& visible);

}  // namespace strata::device
