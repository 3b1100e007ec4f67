// Compiled by CTest layering_build against the include root of the lowest layer (base): the
// include below reaches the runtime, far above it, and must not compile; and by
// layering_build_public_only against the mesh's, which reaches the runtime only through
// include/strata/.
#include "runtime/op_queue.hpp"
