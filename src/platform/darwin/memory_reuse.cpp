#include "kwd/platform/memory_reuse.hpp"

namespace kwd::platform {

// Left to the system allocator's own behaviour on macOS: no setting is made there.
void keep_freed_memory_for_reuse() {}

// Left to the system allocator too, which gives large freed blocks back on its own.
void return_large_blocks_at_once() {}
void give_freed_memory_back_if_grown() {}
void give_freed_memory_back() {}

}  // namespace kwd::platform
