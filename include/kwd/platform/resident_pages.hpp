#pragma once

#include <cstddef>

namespace kwd::platform {

// Unmaps, from this process only, the file-backed pages it has mapped but never written: the
// code and read-only data of the binary and its libraries. They stay in the page cache, and
// whatever is used again is mapped again at its first touch (a minor fault, with its
// neighbours). Loading, relocating and initialising the libraries touches far more of them
// than a watchdog at rest uses, and the kernel maps the neighbours of each touched page
// besides: 12 MB of RSS for a watchdog whose working set is a fraction of that. Mappings
// holding a page this process wrote (relocated data, .bss) are left whole. Returns the bytes
// that were resident and are no longer; 0 where there is nothing to do or it cannot be done.
std::size_t release_unwritten_file_pages() noexcept;

}  // namespace kwd::platform
