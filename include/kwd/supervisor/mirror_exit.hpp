#pragma once

#include "kwd/supervisor/termination.hpp"

namespace kwd::supervisor {

// Ends this process the way the kernel ended: the same exit code, or the same signal
// re-raised on ourselves (with our own core dumps off: the kernel's core is the one that
// matters). Whoever waits on us sees what they would have seen from the kernel.
[[noreturn]] void exit_like(const Termination& kernel_end);

}  // namespace kwd::supervisor
