// strata-perf without CUDA: --device cuda is refused by name.
#include <stdexcept>

#include "perf_device.hpp"

namespace perf {

DeviceBuffers::DeviceBuffers(size_t, size_t) {
  throw std::runtime_error("--device cuda: this strata-perf was built without CUDA and NCCL");
}
DeviceBuffers::~DeviceBuffers() = default;
strata::Buffer DeviceBuffers::mirror(strata::Buffer host, std::span<const uint8_t>,
                                     std::span<const uint8_t>) const {
  return host;
}
std::string DeviceBuffers::name() const { return {}; }
void copy_memory(void*, const void*, size_t) {}
std::optional<double> time_nccl(strata::Communicator&, const Case&, strata::Buffer, strata::Buffer,
                                int, int) {
  return std::nullopt;
}

}  // namespace perf
