#include "parallel/planted_fault.hpp"

#include <atomic>

namespace gpt {

namespace {
std::atomic<Fault> g_fault{Fault::none};
}

void plant_fault(Fault f) { g_fault = f; }
bool planted(Fault f) { return f != Fault::none && g_fault.load(std::memory_order_relaxed) == f; }

}  // namespace gpt
