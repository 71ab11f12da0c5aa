#pragma once

namespace kwd::platform {

// For a short-lived command that handles outputs of tens of MB (smoke): memory it frees is kept
// for its next allocations instead of going back to the system, so each large output does not
// fault in freshly zeroed pages again (a third of smoke's own time on a 25 MB notebook, in
// clear_page). The peak stays what it was; it is held until the command exits. Not for the
// daemon or a long `run`. A no-op where the allocator has no such setting.
void keep_freed_memory_for_reuse();

}  // namespace kwd::platform
