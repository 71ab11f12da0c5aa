#pragma once

#include <cstddef>

namespace kwd::platform {

// Unmaps, from this process only, the read-only segments (code, read-only data) of the
// binary and every library loaded: their pages stay in the page cache, and whatever is used
// again is mapped again at its first touch (a minor fault, with its neighbours). Loading,
// relocating and initialising the libraries touches far more of them than a watchdog at rest
// uses, and the kernel maps the neighbours of each touched page besides: 12 MB of RSS for a
// watchdog whose working set is a fraction of that. The segments are taken from the dynamic
// linker under its lock (none is unloaded meanwhile); one that overlaps a mapping holding a
// page this process wrote, resident or swapped out, is left alone, and so is everything when
// /proc/self/smaps cannot be read whole. Returns the bytes advised; 0 where nothing was done.
std::size_t release_unwritten_file_pages() noexcept;

}  // namespace kwd::platform
