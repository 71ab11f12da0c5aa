#include "kwd/platform/memory_reuse.hpp"

namespace kwd::platform {

// Left to the system allocator's own behaviour on macOS: no setting is made there.
void keep_freed_memory_for_reuse() {}

}  // namespace kwd::platform
