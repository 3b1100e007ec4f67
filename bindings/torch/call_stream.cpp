#include "call_stream.hpp"

#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <mutex>

namespace strata::torch_backend {

bool cuda_tensors_supported() {
#ifdef STRATA_TORCH_CUDA
  return true;
#else
  return false;
#endif
}

c10::Device call_device(const std::vector<at::Tensor>& inputs,
                        const std::vector<at::Tensor>& outputs, const char* op) {
  std::optional<c10::Device> device;
  bool host = false;
  for (const auto* list : {&inputs, &outputs}) {
    for (const auto& t : *list) {
      if (!t.defined()) continue;
      if (!t.is_cuda()) {
        host = true;
        continue;
      }
      TORCH_CHECK_VALUE(!device || *device == t.device(), "strata ", op, ": tensors on ", *device,
                        " and ", t.device(), " in one call (one device per call)");
      device = t.device();
    }
  }
  TORCH_CHECK_VALUE(!(device && host), "strata ", op, ": CPU and ", *device,
                    " tensors in one call (one device per call)");
  return device.value_or(c10::Device(c10::kCPU));
}

struct CallStream::Impl {
  explicit Impl(c10::Stream s) : stream(s) {}
  c10::Stream stream;
  std::mutex mu;  // run() (completer or waiter) against order_current_stream_after() (waiter)
  c10::Event end{c10::kCUDA};
};

CallStream::CallStream(c10::Device device) {
  if (!device.is_cuda()) return;
  const auto* guard = c10::impl::getDeviceGuardImpl(c10::kCUDA);
  impl_ = std::make_shared<Impl>(guard->getStream(device));
}

void* CallStream::native() const { return impl_ ? impl_->stream.native_handle() : nullptr; }

std::vector<c10::Device> CallStream::devices() const {
  if (!impl_) return {};
  return {impl_->stream.device()};
}

void CallStream::run(const std::function<void()>& f) const {
  if (!impl_) {
    f();
    return;
  }
  c10::StreamGuard on(impl_->stream);  // sets the device too
  f();
}

void CallStream::end_with(const std::function<void()>& f) const {
  run(f);
  if (!impl_) return;
  std::lock_guard<std::mutex> l(impl_->mu);
  impl_->end.record(impl_->stream);
}

void CallStream::order_current_stream_after() const {
  if (!impl_) return;
  const auto device = impl_->stream.device();
  const auto current = c10::impl::getDeviceGuardImpl(c10::kCUDA)->getStream(device);
  if (current == impl_->stream) return;  // same stream: already in order
  std::lock_guard<std::mutex> l(impl_->mu);
  impl_->end.block(current);  // an event never recorded is a no-op
}

}  // namespace strata::torch_backend
