#pragma once

#include "kwd/watch/termination.hpp"

namespace kwd::launch {

// Ends this process the way the kernel ended: the same exit code, or the same signal
// re-raised on ourselves (with our own core dumps off: the kernel's core is the one that
// matters). Whoever waits on us sees what they would have seen from the kernel.
[[noreturn]] void exit_like(const watch::Termination& kernel_end);

}  // namespace kwd::launch
