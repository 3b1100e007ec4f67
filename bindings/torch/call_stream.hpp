// The CUDA stream a torch call on CUDA tensors is ordered on, as ProcessGroupNCCL orders its
// calls: Strata enqueues the collective on the caller's current stream of the tensors' device
// (captured when the call is issued), the finisher's copies (non-contiguous or list outputs) go
// on that stream after it, and an event recorded there lets another stream wait without the
// host. Through c10's device-generic interface (c10::Stream, c10::Event), so the extension needs
// neither CUDA's headers nor torch's CUDA libraries to build: the CUDA side is torch's, loaded
// with it.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <vector>

namespace strata::torch_backend {

/// True when this extension passes CUDA tensors to Strata's device path (built with it).
bool cuda_tensors_supported();

/// The device every CUDA tensor of one call is on (CPU when none is a CUDA tensor). Throws
/// c10::ValueError naming `op` when the call mixes CPU and CUDA tensors or two CUDA devices.
c10::Device call_device(const std::vector<at::Tensor>& inputs,
                        const std::vector<at::Tensor>& outputs, const char* op);

class CallStream {
 public:
  CallStream() = default;  ///< a CPU call: run() just runs, the rest does nothing
  /// For a call on `device`: its current stream on the calling thread (CUDA), else none.
  explicit CallStream(c10::Device device);

  bool cuda() const { return impl_ != nullptr; }
  /// The cudaStream_t Strata enqueues on (valid when cuda()).
  void* native() const;
  /// The devices a torch Future holding the call's outputs must know: {} or {cuda:d}.
  std::vector<c10::Device> devices() const;
  /// Runs `f` with the call's device and stream current (plainly for a CPU call).
  void run(const std::function<void()>& f) const;
  /// run(f), then records the end event on the stream: `f` is the call's last work there (the
  /// copies back and the future), so the event is recorded once a call.
  void end_with(const std::function<void()>& f) const;
  /// Makes the calling thread's current stream of the device wait for the end event (what
  /// end_with() last recorded); no host wait.
  void order_current_stream_after() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace strata::torch_backend
