// Compiled by CTest layering_build against the include root of the lowest layer (base): the
// include below reaches the runtime, far above it, and must not compile.
#include "runtime/op_queue.hpp"
