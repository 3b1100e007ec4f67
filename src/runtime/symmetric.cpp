// Communicator::alloc_symmetric: every rank makes its part, the parts' paths go round the group
// in one all-gather, every rank maps the others', and a second all-gather tells everyone that
// all did before any part may go (a part's /proc path is valid only while its owner holds it).
#include <cstring>
#include <exception>
#include <memory>

#include "runtime/communicator_impl.hpp"
#include "runtime/entry_checks.hpp"
#include "shm/window.hpp"
#include "strata/communicator.hpp"

namespace strata {
namespace {

// What each rank tells the others of its part.
struct Part {
  uint64_t bytes = 0;
  uint32_t id = 0;
  uint32_t made = 0;  // 0: this rank could not make its part
  char path[48] = {};
};
static_assert(sizeof(Part) == 64);

Buffer bytes_of(void* p, size_t n) { return Buffer{p, n, DataType::u8}; }

}  // namespace

SymmetricBuffer Communicator::alloc_symmetric(size_t bytes) {
  auto& c = runtime::checked(impl_);
  ErrorContext where = c.context("alloc_symmetric");
  const uint32_t id = c.next_window();
  if (id > shm::kMaxWindows) {  // the same on every rank
    throw Error(ErrorCode::invalid_argument, where,
                "more than " + std::to_string(shm::kMaxWindows) + " symmetric buffers on a group");
  }
  std::shared_ptr<shm::Window> window;
  std::exception_ptr failure;  // thrown here after the exchange has told the others
  try {
    if (bytes >= shm::kMaxWindowBytes) {
      throw Error(ErrorCode::invalid_argument, where,
                  "a symmetric buffer of " + std::to_string(bytes) + " bytes: at most " +
                      std::to_string(shm::kMaxWindowBytes - 1));
    }
    window = std::make_shared<shm::Window>(id, c.rank, c.size, bytes, where);
  } catch (const Error&) {
    failure = std::current_exception();
  }
  Part mine{bytes, id, window ? 1u : 0u, {}};
  if (window) std::strncpy(mine.path, window->path().c_str(), sizeof(mine.path) - 1);
  std::vector<Part> all(size_t(c.size));
  all_gather(bytes_of(&mine, sizeof mine), bytes_of(all.data(), sizeof(Part) * all.size())).wait();
  if (failure) std::rethrow_exception(failure);  // this rank's own reason first
  for (int r = 0; r < c.size; ++r) {
    const Part& p = all[size_t(r)];
    ErrorContext at = where;
    at.peer = r;
    if (!p.made) {
      throw Error(ErrorCode::transport, at,
                  "rank " + std::to_string(r) + " could not make its part of the symmetric buffer");
    }
    if (p.bytes != bytes || p.id != id) {
      throw Error(ErrorCode::invalid_argument, at,
                  "rank " + std::to_string(r) + " asked for " + std::to_string(p.bytes) +
                      " bytes (its buffer #" + std::to_string(p.id) + "), rank " +
                      std::to_string(c.rank) + " for " + std::to_string(bytes) + " (#" +
                      std::to_string(id) + "): every rank allocates the same, in the same order");
    }
  }
  shm::Segment* segment = c.segment();
  uint8_t mapped = 1;
  try {
    for (int r = 0; r < c.size && segment; ++r) {
      if (r != c.rank) window->map_peer(r, all[size_t(r)].path, where);
    }
  } catch (const Error&) {
    mapped = 0;
    failure = std::current_exception();
  }
  std::vector<uint8_t> maps(size_t(c.size));
  all_gather(bytes_of(&mapped, 1), bytes_of(maps.data(), maps.size())).wait();
  if (failure) std::rethrow_exception(failure);
  for (int r = 0; r < c.size; ++r) {
    if (maps[size_t(r)]) continue;
    ErrorContext at = where;
    at.peer = r;
    throw Error(ErrorCode::transport, at,
                "rank " + std::to_string(r) + " could not map the others' parts of the buffer");
  }
  if (segment) segment->windows().add(window);
  SymmetricBuffer b;
  b.data_ = window->mine();
  b.bytes_ = bytes;
  b.holder_ = std::move(window);
  return b;
}

}  // namespace strata
