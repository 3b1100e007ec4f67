// The device path's checks that need no GPU: one memory kind per call, device memory refused by
// name where it cannot be served, and the choice between NCCL and staging.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "device/device.hpp"
#include "device/path.hpp"
#include "tests/mp/mp.hpp"

using namespace strata;

namespace {

// Runs `f`, which must throw Error(invalid_argument) whose text holds `part`.
template <typename F>
void expect_refused(F f, const std::string& part) {
  mp::expect_error(f, ErrorCode::invalid_argument, {part});
}

TEST(DeviceChecks, OneCallTakesOneMemoryKind) {
  auto& w = mp::world();
  std::vector<float> host(4 * size_t(w.size())), other(4 * size_t(w.size()));
  const Buffer marked{other.data(), other.size(), DataType::f32, MemoryKind::cuda};
  // Without the device path the device buffer itself is refused first.
  const std::string why =
      device::built() ? "input is host memory and output CUDA device memory: one call takes one"
                      : "output is CUDA device memory, but this build has no device path";
  expect_refused([&] { w.all_reduce(buffer(host), marked, ReduceOp::sum); }, why);
  expect_refused([&] { w.all_to_all(buffer(host), marked); }, why);
  // A root's refusal ends its group (the others are told): on a group of its own.
  Communicator spare = w.split(0, w.rank());
  expect_refused([&] { spare.broadcast(buffer(host), marked, 0); },
                 w.rank() == 0 ? why : std::string("CUDA device memory"));
  if (!device::built()) return;
  // A device build: the other order, both named from the pointer's side.
  expect_refused([&] { w.all_reduce(marked, buffer(host), ReduceOp::sum); },
                 "input is CUDA device memory and output host memory");
}

TEST(DeviceChecks, DeviceMemoryRefusedWhereItCannotBeServed) {
  auto& w = mp::world();
  std::vector<float> h(8);
  const Buffer marked{h.data(), h.size(), DataType::f32, MemoryKind::cuda};
  // Without CUDA in the build, the argument check; with it, the pointer's attributes: this is
  // host memory (a GPU machine) or CUDA cannot be asked (no GPU).
  const std::string why = device::built() ? "input is marked CUDA device memory"
                                          : "is CUDA device memory, but this build has no device";
  expect_refused([&] { w.all_reduce(marked, ReduceOp::sum); }, why);
  expect_refused([&] { w.send(marked, (w.rank() + 1) % w.size()); }, why);
  // Nothing moved: the group still works.
  std::vector<int32_t> one{1};
  w.all_reduce(buffer(one), ReduceOp::sum).wait();
  EXPECT_EQ(one[0], w.size());
}

TEST(DevicePath, DistinctGpusTakeNcclSharedOnesStage) {
  const ErrorContext where{.rank = 0, .group = "world", .op = "all_reduce"};
  using device::Path;
  EXPECT_EQ(device::choose_path({"a", "b", "c"}, true, "", where), Path::nccl);
  EXPECT_EQ(device::choose_path({"a"}, true, "", where), Path::nccl);
  EXPECT_EQ(device::choose_path({"a", "b", "a"}, true, "", where), Path::staged);
  EXPECT_EQ(device::choose_path({"a", "b"}, false, "", where), Path::staged);
  EXPECT_EQ(device::choose_path({"a", "b"}, true, "staged", where), Path::staged);
  EXPECT_EQ(device::choose_path({"a", "b"}, true, "nccl", where), Path::nccl);
}

TEST(DevicePath, RanksLeftOnOneGpuOfSeveralAreToldToTakeTheirOwn) {
  // Four ranks of an 8-GPU node, none of which set its device: all on GPU a.
  const std::string advice = device::shared_gpu_advice({"a", "a", "a", "a"}, {8, 8, 8, 8});
  EXPECT_NE(advice.find("ranks 0 and 1 (and 2 more) share GPU a though rank 0 sees 8 GPUs"),
            std::string::npos)
      << advice;
  EXPECT_NE(advice.find("torch.cuda.set_device(local_rank)"), std::string::npos) << advice;
  // Two pairs, the second one the mistake: named by its own ranks.
  EXPECT_NE(device::shared_gpu_advice({"a", "b", "c", "b"}, {1, 2, 1, 2})
                .find("ranks 1 and 3 share GPU b though rank 1 sees 2 GPUs"),
            std::string::npos);
  // Nothing to advise: every rank on its own GPU, or sharers that see one GPU each (a one-GPU
  // machine, CUDA_VISIBLE_DEVICES given per rank).
  EXPECT_EQ(device::shared_gpu_advice({"a", "b", "c"}, {8, 8, 8}), "");
  EXPECT_EQ(device::shared_gpu_advice({"a", "a"}, {1, 1}), "");
}

TEST(DevicePath, ForcedNcclWhereItCannotRunIsRefused) {
  const ErrorContext where{.rank = 0, .group = "world", .op = "all_reduce"};
  expect_refused(
      [&] {
        device::choose_path({"a", "b", "c", "b"}, true, "nccl", where);
      },
      "STRATA_DEVICE_PATH=nccl, but ranks 1 and 3 share GPU b and NCCL refuses");
  expect_refused(
      [&] {
        device::choose_path({"a", "b"}, false, "nccl", where);
      },
      "STRATA_DEVICE_PATH=nccl, but this build of Strata has no NCCL");
}

}  // namespace
