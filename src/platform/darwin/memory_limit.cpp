#include "kwd/platform/memory_limit.hpp"

namespace kwd::platform {

// macOS has no per-process-tree memory ceiling an unprivileged process can set (jetsam
// limits are the system's own), so --memory-limit is refused with a reason.
std::unique_ptr<KernelMemoryLimit> make_memory_limit(std::uint64_t /*bytes*/,
                                                     std::string& problem) {
  problem = "--memory-limit needs Linux cgroups; macOS has no equivalent the watchdog can set";
  return nullptr;
}

}  // namespace kwd::platform
