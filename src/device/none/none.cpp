// device.hpp and nccl.hpp in a build without CUDA: every use is refused by name. The runtime
// refuses a device buffer before it gets here (runtime/argument_checks.cpp); these guard the rest.
#include "device/nccl.hpp"

namespace strata::device {
namespace {

[[noreturn]] void refuse(const ErrorContext& where) {
  throw Error(ErrorCode::invalid_argument, where,
              "CUDA device memory, but this build of Strata has no device path (built without "
              "CUDA and NCCL: docs/device.md)");
}

}  // namespace

bool built() { return false; }
int device_of(const void*, const ErrorContext& where, const char*) { refuse(where); }
void use_device(int, const ErrorContext& where) { refuse(where); }
std::string device_uuid(int, const ErrorContext& where) { refuse(where); }
int device_count(const ErrorContext& where) { refuse(where); }
OwnStream::OwnStream(const ErrorContext& where) { refuse(where); }
OwnStream::~OwnStream() = default;
Event::Event(const ErrorContext& where) { refuse(where); }
Event::~Event() = default;
void Event::record(Stream, const ErrorContext& where) { refuse(where); }
bool Event::done(const ErrorContext& where) const { refuse(where); }
Pinned::~Pinned() = default;
void* Pinned::get(size_t, const ErrorContext& where) { refuse(where); }
void copy_async(void*, const void*, size_t, Stream, const ErrorContext& where) { refuse(where); }

NcclId nccl_unique_id(const ErrorContext& where) { refuse(where); }
std::string nccl_refuses(DataType, std::optional<ReduceOp>) {
  return "this build of Strata has no NCCL";
}
Nccl::Nccl(const NcclId&, int, int, Clock::time_point, const ErrorContext& where) { refuse(where); }
Nccl::~Nccl() = default;
void Nccl::all_reduce(const void*, void*, size_t, DataType, ReduceOp, Stream) { refuse(where_); }
void Nccl::reduce(const void*, void*, size_t, DataType, ReduceOp, int, Stream) { refuse(where_); }
void Nccl::broadcast(const void*, void*, size_t, DataType, int, Stream) { refuse(where_); }
void Nccl::reduce_scatter(const void*, void*, size_t, DataType, ReduceOp, Stream) {
  refuse(where_);
}
void Nccl::all_gather(const void*, void*, size_t, DataType, Stream) { refuse(where_); }
void Nccl::group_start() { refuse(where_); }
void Nccl::group_end() { refuse(where_); }
void Nccl::send(const void*, size_t, DataType, int, Stream) { refuse(where_); }
void Nccl::recv(void*, size_t, DataType, int, Stream) { refuse(where_); }
std::unique_ptr<Nccl> Nccl::split(int, int, Clock::time_point, const ErrorContext& where) {
  refuse(where);
  return nullptr;
}
std::string Nccl::async_error() { return {}; }
void Nccl::abort() {}
void Nccl::settle(const char*, int) {}

}  // namespace strata::device
